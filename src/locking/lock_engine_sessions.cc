// LockEngine: sessions closing, shutdown, and the views of what is held and queued.
#include <algorithm>

#include "core/election_record.h"
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
    if (r == nullptr) continue;
    for (size_t i = r->holders.size(); i-- > 0;) {
      if (i >= r->holders.size() || r->holders[i]->session != session) continue;
      auto h = TakeHolder(*r, name, r->holders[i].get());
      ReleaseEverywhere(name, *r, *h);
    }
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
  if (r == nullptr || !r->holders.empty() || !r->waiters.empty() || r->attempt_in_flight) return;
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
    while (!r->holders.empty()) {
      auto h = TakeHolder(*r, name, r->holders.back().get());
      // A detached lease outlives its agent's run: it ends by its ttl.
      if (!h->detached) ReleaseEverywhere(name, *r, *h);
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
  std::vector<std::string> names = it->second.held;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) {
    const Resource& r = *resources_.at(name);
    for (const auto& h : r.holders) {
      if (h->session != session) continue;
      out.push_back({name, h->token.str(), std::max<int64_t>(0, CeilMs(h->valid_until - now)),
                     h->renew, ModeOf(r.shape, h->shared), r.shape.permits, h->permit,
                     r.shape.kind});
    }
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

LockView LockEngine::ViewOf(const std::string& name, const Resource& r, const Holder& h,
                            Clock::time_point now) const {
  LockView v{name,     h.session, CeilMs(now - h.acquired),
             std::max<int64_t>(0, CeilMs(h.valid_until - now)),
             h.renew,  static_cast<int>(r.waiters.size()), h.ttl_ms, HoldKey(PlaceOf(name, r, h)),
             h.fence,  Peer{}};
  v.mode = ModeOf(r.shape, h.shared);
  v.kind = r.shape.kind;
  if (h.record) {
    if (auto stored = ParseStoredRecord(*h.record)) v.election = std::move(stored->record);
  }
  v.permits = r.shape.permits;
  v.permit = h.permit;
  v.holds = static_cast<int>(r.holders.size());
  v.hold = h.serial;
  v.detached = h.detached;
  return v;
}

std::vector<LockView> LockEngine::AllLocks() const {
  std::vector<LockView> out;
  const auto now = Clock::now();
  for (const auto& [name, r] : resources_) {
    for (const auto& h : r->holders) out.push_back(ViewOf(name, *r, *h, now));
  }
  std::sort(out.begin(), out.end(), LongerHeld);
  return out;
}

std::vector<LockView> LockEngine::OldestLocks(size_t limit) const {
  // Select on {acquired, entry} first: building a view (two strings) per held lock would cost
  // more than the selection itself.
  struct Entry {
    Clock::time_point acquired;
    const decltype(resources_)::value_type* resource;
    const Holder* holder;
  };
  std::vector<Entry> held;
  held.reserve(holders_);
  for (const auto& entry : resources_) {
    for (const auto& h : entry.second->holders) held.push_back({h->acquired, &entry, h.get()});
  }
  const auto earlier = [](const Entry& a, const Entry& b) {
    if (a.acquired != b.acquired) return a.acquired < b.acquired;
    if (a.resource->first != b.resource->first) return a.resource->first < b.resource->first;
    return a.holder->serial < b.holder->serial;
  };
  if (held.size() > limit) {
    std::nth_element(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(limit), held.end(),
                     earlier);
    held.resize(limit);
  }
  std::vector<LockView> out;
  out.reserve(held.size());
  const auto now = Clock::now();
  for (const Entry& e : held) {
    out.push_back(ViewOf(e.resource->first, *e.resource->second, *e.holder, now));
  }
  std::sort(out.begin(), out.end(), LongerHeld);
  return out;
}

std::vector<std::pair<std::string, std::string>> LockEngine::HeldGrants() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, r] : resources_) {
    for (const auto& h : r->holders) {
      out.emplace_back(HoldKey(PlaceOf(name, *r, *h)), options_.value_prefix + h->LeaseValue());
    }
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
    const LockShape& shape = resources_.at(*waiting[i].second)->shape;
    out.push_back({*waiting[i].second, w.session, CeilMs(now - w.requested), w.history.wait_ms,
                   Peer{}, ModeOf(shape, w.shared), shape.permits});
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
