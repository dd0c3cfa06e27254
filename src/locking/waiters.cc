#include "locking/waiters.h"

#include <algorithm>

namespace lw {

size_t WaitQueue::live() const {
  return static_cast<size_t>(std::count_if(waiters_.begin(), waiters_.end(),
                                           [](const Waiter& w) { return !w.cancelled; }));
}

Waiter WaitQueue::PopFront() {
  Unindex(waiters_.front());
  Waiter w = std::move(waiters_.front());
  waiters_.pop_front();
  return w;
}

void WaitQueue::DropCancelledFront(const Forget& forget) {
  while (!waiters_.empty() && waiters_.front().cancelled && !waiters_.front().in_attempt) {
    forget(waiters_.front());
    Unindex(waiters_.front());
    waiters_.pop_front();
  }
}

Waiter* WaitQueue::Find(uint64_t id) {
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [id](const Waiter& w) { return w.id == id; });
  return it == waiters_.end() ? nullptr : &*it;
}

std::optional<Waiter> WaitQueue::Take(uint64_t id) {
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [id](const Waiter& w) { return w.id == id; });
  if (it == waiters_.end()) return std::nullopt;
  Unindex(*it);
  Waiter w = std::move(*it);
  waiters_.erase(it);
  return w;
}

bool WaitQueue::RemoveSession(SessionId session, const Forget& forget) {
  bool front_removed = false;
  for (auto w = waiters_.begin(); w != waiters_.end();) {
    if (w->session != session) {
      ++w;
    } else if (w == waiters_.begin() && w->in_attempt) {
      (w++)->cancelled = true;  // the attempt in flight undoes itself
    } else {
      front_removed = front_removed || w == waiters_.begin();
      forget(*w);
      Unindex(*w);
      w = waiters_.erase(w);
    }
  }
  return front_removed;
}

void WaitQueue::CancelAll(const std::function<void(Waiter&)>& visit) {
  for (auto w = waiters_.begin(); w != waiters_.end();) {
    visit(*w);
    if (w == waiters_.begin() && w->in_attempt) {
      (w++)->cancelled = true;
    } else {
      Unindex(*w);
      w = waiters_.erase(w);
    }
  }
}

}  // namespace lw
