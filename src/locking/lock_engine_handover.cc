// LockEngine's part of an in-place upgrade (agent/upgrade.h): the holds a session has, as the
// next process needs them, its waiters dropped so that their requests can be asked again there,
// and a handed hold taken over with no round trip.

#include <unordered_map>

#include "locking/lock_engine.h"

namespace lw {

std::unordered_map<SessionId, std::vector<HandedHold>> LockEngine::HoldsBySession() const {
  std::unordered_map<SessionId, std::vector<HandedHold>> out;
  const_cast<ResourceTable&>(table_).ForEach([&](const std::string& name, const Resource& r) {
    for (const auto& h : r.holders) {
      HandedHold& d = out[h->session].emplace_back();
      d.resource = name;
      d.token = h->token.str();
      d.value = h->LeaseValue();
      d.ttl_ms = h->ttl_ms;
      d.renew = h->renew;
      d.fence = h->fence;
      d.shape = r.shape;
      d.mode = h->mode;
      d.part = h->part;
      if (h->note) d.note = *h->note;
      d.acquired = h->acquired;
      d.valid_until = h->valid_until;
    }
  });
  return out;
}

size_t LockEngine::DropWaiters() {
  size_t dropped = 0;
  table_.ForEach([&](const std::string& name, Resource& r) {
    r.waiters.CancelAll([&](Waiter& w) {
      if (w.cancelled) return;
      ++dropped;
      deadlines_.Erase(w.id);
      ForgetWaiter(w.session, name);
    });
    if (r.retry_timer) r.retry_timer->Stop();
  });
  return dropped;
}

bool LockEngine::AttemptsInFlight() const {
  bool any = false;
  const_cast<ResourceTable&>(table_).ForEach(
      [&](const std::string&, Resource& r) { any = any || r.attempt_in_flight; });
  return any;
}

std::optional<Failure> LockEngine::Adopt(SessionId session, const HandedHold& hold) {
  const Resource* existing = Find(hold.resource);
  if (existing != nullptr && !(existing->shape == hold.shape)) {
    return KindMismatch(hold.resource, hold.shape.WithArticle(),
                        existing->shape.WithArticle() + " through this agent");
  }
  const auto now = Clock::now();
  if (hold.valid_until <= now) {
    return Failure{ErrorCode::kNotHeld, "its validity ran out during the hand-over"};
  }
  Resource& r = table_.Add(hold.resource, hold.shape);
  auto h = std::make_unique<Holder>();
  h->serial = next_waiter_id_++;
  h->session = session;
  h->token = FixedToken(hold.token);
  if (hold.value != hold.token) h->lease = std::make_unique<FixedToken>(hold.value);
  h->ttl_ms = hold.ttl_ms;
  h->renew = hold.renew;
  h->fence = hold.fence;
  h->mode = hold.mode;
  h->part = static_cast<int16_t>(hold.part);
  h->kept = IsLeaseSession(session);
  if (!hold.note.empty()) h->note = std::make_unique<std::string>(hold.note);
  h->acquired = hold.acquired;  // held since its grant, whichever process granted it
  h->valid_until = hold.valid_until;
  stats_->holds[hold.mode].Inc();
  Holder& held = table_.Install(r, hold.resource, std::move(h));
  ScheduleHolder(hold.resource, held,
                 AdoptedDelayMs(held.renew, held.ttl_ms, MsLeft(held.valid_until, now)));
  return std::nullopt;
}

}  // namespace lw
