#include "locking/resource_table.h"

#include <algorithm>
#include <utility>

namespace lw {

ResourceTable::ResourceTable(std::string key_prefix, std::string fence_prefix,
                             std::string value_prefix, SessionTable* sessions,
                             int64_t stuck_after_ms)
    : key_prefix_(std::move(key_prefix)),
      fence_prefix_(std::move(fence_prefix)),
      value_prefix_(std::move(value_prefix)),
      own_sessions_(sessions != nullptr ? nullptr : std::make_unique<SessionTable>()),
      sessions_(sessions != nullptr ? *sessions : *own_sessions_),
      stuck_after_ms_(stuck_after_ms) {}

Resource* ResourceTable::Find(const std::string& name) {
  auto it = resources_.find(name);
  return it == resources_.end() ? nullptr : it->second.get();
}

const Resource* ResourceTable::Find(const std::string& name) const {
  auto it = resources_.find(name);
  return it == resources_.end() ? nullptr : it->second.get();
}

Resource& ResourceTable::Add(const std::string& name, const LockShape& shape) {
  auto [it, added] = resources_.try_emplace(name);
  if (added) {
    it->second = std::make_unique<Resource>();
    it->second->name = &it->first;
    it->second->shape = shape;
    it->second->waiters.Attach(&waiter_index_, &it->first);
  }
  return *it->second;
}

Holder* ResourceTable::FindHolder(const std::string& name, const std::string& token) {
  Resource* r = Find(name);
  if (r == nullptr) return nullptr;
  for (auto& h : r->holders) {
    if (h->token == token) return h.get();
  }
  return nullptr;
}

Holder* ResourceTable::WithSerial(Resource& r, uint64_t serial) {
  for (auto& h : r.holders) {
    if (h->serial == serial) return h.get();
  }
  return nullptr;
}

HoldPlace ResourceTable::PlaceOf(const std::string& name, const Resource& r, HoldMode mode,
                                 int part) const {
  HoldPlace p{key_prefix_, fence_prefix_, name, r.shape, mode, part};
  p.mark_readers = mark_readers_;
  p.native_claims = native_claims_;
  return p;
}

HoldPlace ResourceTable::PlaceOf(const std::string& name, const Resource& r,
                                 const Holder& h) const {
  HoldPlace p = PlaceOf(name, r, h.mode, h.part);
  if (h.note) p.record = *h.note;
  return p;
}

std::optional<ResourceTable::FoundGrant> ResourceTable::FindGrant(const std::string& key,
                                                                  const std::string& value) const {
  const auto part = ParseLockKey(key_prefix_, key);
  const Resource* r = part ? Find(part->resource) : nullptr;
  if (r == nullptr) return std::nullopt;
  for (const auto& h : r->holders) {
    if (value_prefix_ + h->LeaseValue() == value &&
        r->kind().HoldKey(PlaceOf(part->resource, *r, *h)) == key) {
      return FoundGrant{part->resource, h.get()};
    }
  }
  return std::nullopt;
}

void ResourceTable::Unqueued(SessionId session, const std::string& name) {
  if (ClientSession* s = sessions_.Find(session)) s->locks.Forget(name);
}

Holder& ResourceTable::Install(Resource& r, const std::string& name, std::unique_ptr<Holder> h) {
  Touched(name, *h);
  sessions_.Open(h->session).locks.held.push_back(name);
  r.holders.push_back(std::move(h));
  ++holds_;
  const Holder& held = *r.holders.back();
  const HoldEntry entry{held.acquired, r.name, held.serial, &r, &held};
  by_age_.insert(entry);
  if (Quiet(held)) quiet_.insert(entry);
  return *r.holders.back();
}

std::unique_ptr<Holder> ResourceTable::Take(Resource& r, const std::string& name,
                                            const Holder* which) {
  auto it = std::find_if(r.holders.begin(), r.holders.end(),
                         [which](const auto& h) { return h.get() == which; });
  auto h = std::move(*it);
  Touched(name, *h);
  r.holders.erase(it);
  --holds_;
  const HoldEntry entry{h->acquired, r.name, h->serial, &r, h.get()};
  by_age_.erase(entry);
  if (Quiet(*h)) quiet_.erase(entry);
  if (ClientSession* s = sessions_.Find(h->session)) s->locks.Dropped(name);
  return h;
}

SessionLocks ResourceTable::CloseSession(SessionId session) {
  ClientSession* s = sessions_.Find(session);
  if (s == nullptr) return {};
  SessionLocks locks = std::exchange(s->locks, {});
  if (own_sessions_) sessions_.Erase(session);
  return locks;
}

void ResourceTable::ForgetHeldLists() {
  sessions_.ForEach([](ClientSession& s) { s.locks.held.clear(); });
}

// ---- views

std::vector<HeldLock> ResourceTable::HeldBy(SessionId session) const {
  std::vector<HeldLock> out;
  const ClientSession* s = sessions_.Find(session);
  if (s == nullptr) return out;
  const auto now = Clock::now();
  std::vector<std::string> names = s->locks.held;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) {
    const Resource& r = *resources_.at(name);
    for (const auto& h : r.holders) {
      if (h->session != session) continue;
      out.push_back({name, h->token.str(), std::max<int64_t>(0, CeilMs(h->valid_until - now)),
                     h->renew, h->mode, r.shape.permits, h->part, r.shape.kind});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const HeldLock& a, const HeldLock& b) { return a.resource < b.resource; });
  return out;
}

size_t ResourceTable::Commitments(SessionId session) const {
  const ClientSession* s = sessions_.Find(session);
  return s == nullptr ? 0 : s->locks.commitments();
}

namespace {

bool LongerHeld(const LockView& a, const LockView& b) {
  return a.held_ms != b.held_ms ? a.held_ms > b.held_ms : a.resource < b.resource;
}

}  // namespace

LockView ResourceTable::ViewOf(const std::string& name, const Resource& r, const Holder& h,
                               Clock::time_point now) const {
  LockView v;
  v.resource = name;
  v.session = h.session;
  v.held_ms = CeilMs(now - h.acquired);
  v.validity_ms = std::max<int64_t>(0, CeilMs(h.valid_until - now));
  v.renew = h.renew;
  v.waiters = static_cast<int>(r.waiters.size());
  v.ttl_ms = h.ttl_ms;
  v.key = r.kind().HoldKey(PlaceOf(name, r, h));
  v.fence = h.fence;
  v.mode = h.mode;
  v.kind = r.shape.kind;
  v.permits = r.shape.permits;
  v.permit = h.part;
  v.holds = static_cast<int>(r.holders.size());
  v.hold = h.serial;
  r.kind().Describe(h, v);
  return v;
}

std::vector<LockView> ResourceTable::AllLocks() const {
  std::vector<LockView> out;
  const auto now = Clock::now();
  for (const auto& [name, r] : resources_) {
    for (const auto& h : r->holders) out.push_back(ViewOf(name, *r, *h, now));
  }
  std::sort(out.begin(), out.end(), LongerHeld);
  return out;
}

std::vector<LockView> ResourceTable::ListedLocks(size_t limit, Clock::time_point now,
                                                 GrantPairs* grants) const {
  const auto stuck_before = now - std::chrono::milliseconds(stuck_after_ms_);
  std::vector<const HoldEntry*> listed;
  // The stuck: the front of by_age_ held longer than stuck_after, merged with quiet_ (both in
  // age order; a hold may be in both).
  auto a = by_age_.begin();
  auto q = quiet_.begin();
  while (listed.size() < limit) {
    const bool from_a = a != by_age_.end() && a->acquired < stuck_before;
    const bool from_q = q != quiet_.end();
    if (!from_a && !from_q) break;
    if (from_a && (!from_q || *a < *q)) {
      listed.push_back(&*a++);
    } else if (from_a && !(*q < *a)) {
      listed.push_back(&*a++);
      ++q;
    } else {
      listed.push_back(&*q++);
    }
  }
  // The others, oldest first: the rest of by_age_ less the quiet, which are all listed already
  // when there is room left (so this skips fewer than `limit`).
  for (; a != by_age_.end() && listed.size() < limit; ++a) {
    if (!quiet_.contains(*a)) listed.push_back(&*a);
  }
  std::vector<LockView> out;
  out.reserve(listed.size());
  for (const HoldEntry* e : listed) {
    out.push_back(ViewOf(*e->name, *e->resource, *e->holder, now));
    if (grants) grants->emplace_back(out.back().key, value_prefix_ + e->holder->LeaseValue());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ResourceTable::HeldGrants() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, r] : resources_) {
    for (const auto& h : r->holders) {
      out.emplace_back(r->kind().HoldKey(PlaceOf(name, *r, *h)), value_prefix_ + h->LeaseValue());
    }
  }
  return out;
}

std::vector<WaiterView> ResourceTable::AllWaiters(size_t limit) const {
  std::vector<WaiterView> out;
  const auto now = Clock::now();
  for (const WaiterIndex::Entry& e : waiter_index_.entries()) {
    if (out.size() >= limit) break;
    const Waiter& w = *e.waiter;
    if (w.cancelled || w.expired) continue;
    const LockShape& shape = resources_.at(*e.name)->shape;
    out.push_back({*e.name, w.session, CeilMs(now - w.requested), w.history.wait_ms, Peer{},
                   w.mode, shape.permits});
  }
  return out;
}

}  // namespace lw
