// LockEngine: sessions closing and shutdown.
#include <algorithm>

#include "locking/failure_text.h"
#include "locking/lock_engine.h"

namespace lw {

void LockEngine::ForgetWaiter(SessionId session, const std::string& name) {
  table_.Unqueued(session, name);
}

void LockEngine::CloseSession(SessionId session) {
  SessionLocks index = table_.CloseSession(session);
  std::vector<std::string> touched;
  // Its waiters go first: a release in turn names the next waiter left, never one of its own.
  for (const auto& [name, count] : index.waiting) {
    Resource* r = Find(name);
    if (r == nullptr) continue;
    const bool front_removed =
        r->waiters.RemoveSession(session, [this](const Waiter& w) { deadlines_.Erase(w.id); });
    if (front_removed && r->retry_timer) r->retry_timer->Stop();
    touched.push_back(name);
  }
  for (const auto& name : index.held) {
    Resource* r = Find(name);
    if (r == nullptr) continue;
    for (size_t i = r->holders.size(); i-- > 0;) {
      if (i >= r->holders.size() || r->holders[i]->session != session) continue;
      auto h = TakeHolder(*r, name, r->holders[i].get());
      ReleaseEverywhere(name, *r, *h);
    }
    touched.push_back(name);
  }
  for (const auto& name : touched) Pump(name);
}

void LockEngine::MaybeErase(const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr || !r->idle()) return;
  LeaveQueue(name, *r);  // its last waiter gave up (or was granted and released)
  if (r->watched && options_.release_watch != nullptr) options_.release_watch->Unwatch(KeyOf(name));
  table_.Erase(name);
}

void LockEngine::Shutdown(std::function<void()> done, bool release) {
  shutting_down_ = true;
  shutdown_done_ = std::move(done);
  // Every lock goes below: dropping the per-session lists first keeps TakeHolder from
  // searching them lock by lock.
  table_.ForgetHeldLists();
  std::vector<AcquireDone> refused;
  table_.ForEach([&](const std::string& name, Resource& r) {
    r.waiters.CancelAll([&](Waiter& w) {
      if (!w.cancelled) Report(w, name, /*granted=*/false, ErrorCode::kShuttingDown);
      refused.push_back(std::move(w.done));
    });
    if (r.retry_timer) r.retry_timer->Stop();
    while (!r.holders.empty()) {
      auto h = TakeHolder(r, name, r.holders.back().get());
      // A kept hold outlives its agent's run: it ends by its release or its ttl. So does every
      // hold when the stop leaves them for a resume.
      if (release && !h->kept) ReleaseEverywhere(name, r, *h);
    }
  });
  // No waiter or holder is left: their deadlines must not keep the loop alive.
  deadlines_.Close();
  renewer_.Clear();
  for (auto& d : refused) d(ShuttingDown(/*retry_hint=*/false));
  Defer([this] { MaybeFinishShutdown(); });
}

void LockEngine::MaybeFinishShutdown() {
  if (!shutting_down_ || !shutdown_done_ || rounds_.in_flight() != 0) return;
  // Every waiter and holder is gone: their superseded deadlines must not keep the loop alive.
  deadlines_.Close();
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  done();
}

std::vector<NodeStatus> LockEngine::NodeStatuses() const {
  std::vector<NodeStatus> out;
  for (const Node* n : rounds_.nodes()) out.push_back(n->status());
  return out;
}

}  // namespace lw
