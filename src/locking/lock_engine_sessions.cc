// LockEngine: sessions closing, shutdown, and the views of what is held and queued.
#include <algorithm>

#include "locking/failure_text.h"
#include "locking/lock_engine.h"

namespace lw {

void LockEngine::ForgetWaiter(SessionId session, const std::string& name) {
  auto it = sessions_.find(session);
  if (it != sessions_.end()) it->second.Forget(name);
}

void LockEngine::CloseSession(SessionId session) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  SessionIndex index = std::move(it->second);
  sessions_.erase(it);
  std::vector<std::string> touched;
  for (const auto& name : index.held) {
    Resource* r = Find(name);
    if (r == nullptr || !r->holder || r->holder->session != session) continue;
    auto h = TakeHolder(*r, name);
    ReleaseEverywhere(KeyOf(name), h->LeaseValue());
    touched.push_back(name);
  }
  for (const auto& [name, count] : index.waiting) {
    Resource* r = Find(name);
    if (r == nullptr) continue;
    const bool front_removed =
        r->waiters.RemoveSession(session, [this](const Waiter& w) { deadlines_.Erase(w.id); });
    if (front_removed && r->retry_timer) r->retry_timer->Stop();
    touched.push_back(name);
  }
  for (const auto& name : touched) Pump(name);
}

void LockEngine::MaybeErase(const std::string& name) {
  Resource* r = Find(name);
  if (r == nullptr || r->holder || !r->waiters.empty() || r->attempt_in_flight) return;
  if (r->retry_timer && r->retry_timer->active()) return;
  if (r->watched && options_.release_watch != nullptr) options_.release_watch->Unwatch(KeyOf(name));
  resources_.erase(name);
}

void LockEngine::Shutdown(std::function<void()> done) {
  shutting_down_ = true;
  shutdown_done_ = std::move(done);
  // Every lock goes below: dropping the per-session lists first keeps TakeHolder from
  // searching them lock by lock.
  for (auto& [id, index] : sessions_) index.held.clear();
  std::vector<AcquireDone> refused;
  for (auto& [name, r] : resources_) {
    r->waiters.CancelAll([&, &name = name](Waiter& w) {
      if (!w.cancelled) Report(w, name, /*granted=*/false, ErrorCode::kShuttingDown);
      refused.push_back(std::move(w.done));
    });
    if (r->retry_timer) r->retry_timer->Stop();
    if (r->holder) {
      auto h = TakeHolder(*r, name);
      ReleaseEverywhere(KeyOf(name), h->LeaseValue());
    }
  }
  // No waiter or holder is left: their deadlines must not keep the loop alive.
  deadlines_.Close();
  renewals_.Clear();
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

std::vector<HeldLock> LockEngine::HeldBy(SessionId session) const {
  std::vector<HeldLock> out;
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return out;
  const auto now = Clock::now();
  for (const auto& name : it->second.held) {
    const Holder& h = *resources_.at(name)->holder;
    out.push_back(
        {name, h.token.str(), std::max<int64_t>(0, CeilMs(h.valid_until - now)), h.renew});
  }
  std::sort(out.begin(), out.end(),
            [](const HeldLock& a, const HeldLock& b) { return a.resource < b.resource; });
  return out;
}

namespace {

bool LongerHeld(const LockView& a, const LockView& b) {
  return a.held_ms != b.held_ms ? a.held_ms > b.held_ms : a.resource < b.resource;
}

}  // namespace

LockView LockEngine::ViewOf(const std::string& name, const Resource& r,
                            Clock::time_point now) const {
  const Holder& h = *r.holder;
  return {name,     h.session, CeilMs(now - h.acquired),
          std::max<int64_t>(0, CeilMs(h.valid_until - now)),
          h.renew,  static_cast<int>(r.waiters.size()), h.ttl_ms, KeyOf(name), h.fence, Peer{}};
}

std::vector<LockView> LockEngine::AllLocks() const {
  std::vector<LockView> out;
  const auto now = Clock::now();
  for (const auto& [name, r] : resources_) {
    if (r->holder) out.push_back(ViewOf(name, *r, now));
  }
  std::sort(out.begin(), out.end(), LongerHeld);
  return out;
}

std::vector<LockView> LockEngine::OldestLocks(size_t limit) const {
  // Select on {acquired, entry} first: building a view (two strings) per held lock would cost
  // more than the selection itself.
  using Entry = std::pair<Clock::time_point, const decltype(resources_)::value_type*>;
  std::vector<Entry> held;
  held.reserve(holders_);
  for (const auto& entry : resources_) {
    if (entry.second->holder) held.emplace_back(entry.second->holder->acquired, &entry);
  }
  const auto earlier = [](const Entry& a, const Entry& b) {
    return a.first != b.first ? a.first < b.first : a.second->first < b.second->first;
  };
  if (held.size() > limit) {
    std::nth_element(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(limit), held.end(),
                     earlier);
    held.resize(limit);
  }
  std::vector<LockView> out;
  out.reserve(held.size());
  const auto now = Clock::now();
  for (const auto& [acquired, entry] : held) out.push_back(ViewOf(entry->first, *entry->second, now));
  std::sort(out.begin(), out.end(), LongerHeld);
  return out;
}

std::vector<std::pair<std::string, std::string>> LockEngine::HeldGrants() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, r] : resources_) {
    if (r->holder) out.emplace_back(KeyOf(name), options_.value_prefix + r->holder->LeaseValue());
  }
  return out;
}

std::vector<WaiterView> LockEngine::AllWaiters(size_t limit) const {
  std::vector<std::pair<const Waiter*, const std::string*>> waiting;
  for (const auto& [name, r] : resources_) {
    r->waiters.ForEachWaiting([&, &name = name](const Waiter& w) { waiting.emplace_back(&w, &name); });
  }
  const auto earlier = [](const auto& a, const auto& b) {
    return a.first->requested != b.first->requested ? a.first->requested < b.first->requested
                                                    : a.first->id < b.first->id;
  };
  const size_t n = std::min(limit, waiting.size());
  std::partial_sort(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n),
                    waiting.end(), earlier);
  std::vector<WaiterView> out;
  out.reserve(n);
  const auto now = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    const Waiter& w = *waiting[i].first;
    out.push_back({*waiting[i].second, w.session, CeilMs(now - w.requested), w.history.wait_ms,
                   Peer{}});
  }
  return out;
}

size_t LockEngine::Commitments(SessionId session) const {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return 0;
  size_t n = it->second.held.size();
  for (const auto& [name, count] : it->second.waiting) n += static_cast<size_t>(count);
  return n;
}

size_t LockEngine::waiters() const {
  size_t n = 0;
  for (const auto& [name, r] : resources_) n += r->waiters.size();
  return n;
}

std::vector<NodeStatus> LockEngine::NodeStatuses() const {
  std::vector<NodeStatus> out;
  for (const Node* n : rounds_.nodes()) out.push_back(n->status());
  return out;
}

}  // namespace lw
