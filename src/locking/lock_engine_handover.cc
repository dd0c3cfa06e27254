// LockEngine's part of an in-place upgrade (agent/upgrade.h): the holds a session has, as the
// next process needs them, its waiters dropped so that their requests can be asked again there,
// and a handed hold taken over with no round trip.

#include <algorithm>
#include <unordered_map>

#include "locking/lock_engine.h"

namespace lw {
namespace {

HandedHold HandedOf(const std::string& name, const Resource& r, const Holder& h) {
  HandedHold d;
  d.serial = h.serial;
  d.resource = name;
  d.token = h.token.str();
  d.value = h.LeaseValue();
  d.ttl_ms = h.ttl_ms;
  d.renew = h.renew;
  d.fence = h.fence;
  d.shape = r.shape;
  d.mode = h.mode;
  d.part = h.part;
  if (h.note) d.note = *h.note;
  d.acquired = h.acquired;
  d.valid_until = h.valid_until;
  d.owner = h.owner;
  d.depth = h.depth;
  return d;
}

}  // namespace

std::unordered_map<SessionId, std::vector<HandedHold>> LockEngine::HoldsBySession() const {
  std::unordered_map<SessionId, std::vector<HandedHold>> out;
  const_cast<ResourceTable&>(table_).ForEach([&](const std::string& name, const Resource& r) {
    for (const auto& h : r.holders) out[h->session].push_back(HandedOf(name, r, *h));
  });
  return out;
}

void LockEngine::VisitHolds(SessionId session,
                            const std::function<void(const std::string&, const Resource&,
                                                     const Holder&)>& visit) const {
  const ClientSession* s = table_.sessions().Find(session);
  if (s == nullptr) return;
  // A name is listed once per hold: each resource is visited once (its address tells them
  // apart; no string is compared), in the order the session's list has them.
  std::vector<std::pair<const Resource*, const std::string*>> resources;
  resources.reserve(s->locks.held.size());
  for (const auto& name : s->locks.held) {
    if (const Resource* r = Find(name)) resources.emplace_back(r, r->name);
  }
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  for (const auto& [r, name] : resources) {
    for (const auto& h : r->holders) {
      if (h->session == session) visit(*name, *r, *h);
    }
  }
}

std::vector<HandedHold> LockEngine::HoldsOf(SessionId session) const {
  std::vector<HandedHold> out;
  VisitHolds(session, [&](const std::string& name, const Resource& r, const Holder& h) {
    out.push_back(HandedOf(name, r, h));
  });
  return out;
}

void LockEngine::ChangesSince(const std::unordered_set<uint64_t>& copied,
                              const std::unordered_map<uint64_t, std::string>& touched,
                              std::unordered_map<SessionId, std::vector<HandedHold>>* full,
                              std::unordered_map<SessionId, std::vector<HoldUpdate>>* updates,
                              std::vector<uint64_t>* gone) const {
  for (const auto& [serial, name] : touched) {
    const Resource* r = Find(name);
    const Holder* h =
        r == nullptr ? nullptr : ResourceTable::WithSerial(const_cast<Resource&>(*r), serial);
    const bool was_copied = copied.count(serial) != 0;
    if (h == nullptr) {
      if (was_copied) gone->push_back(serial);
    } else if (was_copied) {
      (*updates)[h->session].push_back({h->serial, h->ttl_ms, h->valid_until, h->depth});
    } else {
      (*full)[h->session].push_back(HandedOf(*r->name, *r, *h));
    }
  }
}

std::variant<const Holder*, Failure> LockEngine::Stage(SessionId session,
                                                      const HandedHold& hold) {
  auto installed = InstallHanded(session, hold, /*staged=*/true);
  if (const auto* f = std::get_if<Failure>(&installed)) return *f;
  return std::get<Holder*>(installed);
}

void LockEngine::UpdateStaged(const std::string& name, const Holder* staged,
                              const HoldUpdate& now) {
  auto* h = const_cast<Holder*>(staged);  // one of this engine's holds (Stage's answer)
  h->depth = static_cast<uint16_t>(now.depth);
  if (staged->ttl_ms == now.ttl_ms && staged->valid_until == now.valid_until) return;
  h->ttl_ms = now.ttl_ms;
  h->valid_until = now.valid_until;
  ScheduleHolder(name, *h, AdoptedDelayMs(h->renew, h->ttl_ms, MsLeft(h->valid_until, Clock::now())));
}

void LockEngine::DropStaged(const std::string& name, const Holder* staged) {
  Resource* r = Find(name);
  if (r == nullptr) return;
  auto gone = table_.Take(*r, name, staged);
  stats_->holds[gone->mode].Dec();
  deadlines_.Erase(gone->serial);
  MaybeErase(name);
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
  auto installed = InstallHanded(session, hold, /*staged=*/false);
  if (const auto* f = std::get_if<Failure>(&installed)) return *f;
  return std::nullopt;
}

std::variant<Holder*, Failure> LockEngine::InstallHanded(SessionId session,
                                                           const HandedHold& hold,
                                                    bool staged) {
  const Resource* existing = Find(hold.resource);
  if (existing != nullptr && !(existing->shape == hold.shape)) {
    return KindMismatch(hold.resource, hold.shape.WithArticle(),
                        existing->shape.WithArticle() + " through this agent");
  }
  const auto now = Clock::now();
  if (!staged && hold.valid_until <= now) {
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
  h->owner = hold.owner;
  h->depth = static_cast<uint16_t>(hold.depth);
  if (!hold.note.empty()) h->note = std::make_unique<std::string>(hold.note);
  h->acquired = hold.acquired;  // held since its grant, whichever process granted it
  h->valid_until = hold.valid_until;
  stats_->holds[hold.mode].Inc();
  Holder& held = table_.Install(r, hold.resource, std::move(h));
  ScheduleHolder(hold.resource, held,
                 AdoptedDelayMs(held.renew, held.ttl_ms, MsLeft(held.valid_until, now)));
  return &held;
}

}  // namespace lw
