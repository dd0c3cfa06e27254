#pragma once
// ResourceTable: the lock state the engine keeps, by resource and by session, and the views of
// it (what is held, queued, by whom). The engine decides; this keeps the books: each resource's
// shape, holds, FIFO queue and kind state, and in each session's object (core/client_session.h)
// what it holds and awaits (for Commitments and CloseSession). Pure bookkeeping: no I/O, loop
// thread only.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/client_session.h"
#include "core/defaults.h"
#include "core/lock_view.h"
#include "core/session_id.h"
#include "locking/claims.h"
#include "locking/handoff.h"
#include "locking/holder.h"
#include "locking/kinds/kind.h"
#include "locking/turns.h"
#include "locking/waiters.h"
#include "redis/timer.h"

namespace lw {

struct Resource {
  const std::string* name = nullptr;  // as the table keys it (ResourceTable::Add)
  LockShape shape;
  // What its kind allows: one exclusive holder or any number of shared ones, K permits...
  Holders holders;
  WaitQueue waiters;  // only the front contends on Redis
  std::unique_ptr<Timer> retry_timer;
  bool attempt_in_flight = false;
  bool watched = false;  // release announcements of this key are being listened to
  // A hold was granted through this resource entry: its next claims may meet this agent's own
  // reservation (a release in turn to its next waiter), on which a native SET NX always fails.
  bool granted_here = false;
  KindSlot kind_state;   // its kind's, created by the kind on first use
  TurnState turns;  // its part in taking turns with other agents (locking/turns.h)

  const Kind& kind() const { return KindOf(shape); }
  bool idle() const {
    return holders.empty() && waiters.empty() && !attempt_in_flight &&
           !(retry_timer && retry_timer->active());
  }
};

class ResourceTable {
 public:
  using Clock = std::chrono::steady_clock;

  // Prefixes: where holds live on the masters (EngineOptions). sessions: not owned, must
  // outlive the table (EngineOptions::sessions); null: the table keeps its own. stuck_after_ms:
  // the rule by which ListedLocks lists a hold first (EngineOptions::stuck_after_ms).
  ResourceTable(std::string key_prefix, std::string fence_prefix, std::string value_prefix,
                SessionTable* sessions, int64_t stuck_after_ms = kDefaultStuckAfterMs);

  Resource* Find(const std::string& name);
  const Resource* Find(const std::string& name) const;
  Resource& Add(const std::string& name, const LockShape& shape);
  void Erase(const std::string& name) { resources_.erase(name); }
  Holder* FindHolder(const std::string& name, const std::string& token);
  const Holder* FindHolder(const std::string& name, const std::string& token) const {
    return const_cast<ResourceTable*>(this)->FindHolder(name, token);
  }
  static Holder* WithSerial(Resource& r, uint64_t serial);
  // The hold whose key on the masters is `key` (Kind::HoldKey) holding exactly `value`
  // (value_prefix + its lease value; HeldGrants' inverse), or nothing.
  struct FoundGrant {
    std::string name;
    const Holder* holder;
  };
  std::optional<FoundGrant> FindGrant(const std::string& key, const std::string& value) const;
  template <class Visit>  // visit(name, Resource&) for every resource
  void ForEach(Visit&& visit) {
    for (auto& [name, r] : resources_) visit(name, *r);
  }

  // Where a hold of `name` lives: a part of r (mode, index), or the holder's.
  HoldPlace PlaceOf(const std::string& name, const Resource& r, HoldMode mode, int part) const;
  HoldPlace PlaceOf(const std::string& name, const Resource& r, const Holder& h) const;
  const std::string& key_prefix() const { return key_prefix_; }
  // The key layout every place made from now on carries (HoldPlace::mark_readers, native_claims).
  void SetKeyLayout(bool mark_readers, bool native_claims) {
    mark_readers_ = mark_readers;
    native_claims_ = native_claims;
  }
  const std::string& value_prefix() const { return value_prefix_; }

  // ---- sessions
  SessionTable& sessions() { return sessions_; }
  const SessionTable& sessions() const { return sessions_; }
  void Queued(SessionId session, const std::string& name) {
    ++sessions_.Open(session).locks.waiting[name];
  }
  void Unqueued(SessionId session, const std::string& name);
  Holder& Install(Resource& r, const std::string& name, std::unique_ptr<Holder> h);
  // While `touched` is set (a pre-copied upgrade, docs/upgrade.md): the serial of every hold
  // installed, taken, or marked Touched (its ttl or validity changed) goes in, with its
  // resource's name. Null: nothing is tracked.
  void TrackChanges(std::unordered_map<uint64_t, std::string>* touched) { touched_ = touched; }
  void Touched(const std::string& name, const Holder& h) {
    if (touched_ != nullptr) (*touched_)[h.serial] = name;
  }
  std::unique_ptr<Holder> Take(Resource& r, const std::string& name, const Holder* which);
  // What the session holds and awaits, taken from it (nothing when it has no object). The
  // object stays for its owner to erase (LockService::Closed), unless the table keeps its own.
  SessionLocks CloseSession(SessionId session);
  // Drops every session's list of holds (everything is about to be taken).
  void ForgetHeldLists();

  // ---- views
  // The session's holds, by resource (with their tokens: for the session itself).
  std::vector<HeldLock> HeldBy(SessionId session) const;
  // Locks the session holds plus acquires it has queued: what it could hold at once.
  size_t Commitments(SessionId session) const;
  // Every lock held through this engine, longest-held first.
  std::vector<LockView> AllLocks() const;
  // The `limit` locks an operator looks at first, as of `now`: the stuck ones (held longer than
  // stuck_after, or not renewing with a ttl longer than it: fleet::StuckReason's rule), then the
  // others; each group longest held first (ties: the earlier acquired). With `grants`, also
  // {Redis key, value on the masters} of each listed hold, in the same order (HeldGrants' form).
  // O(limit log n), whatever the locks held.
  using GrantPairs = std::vector<std::pair<std::string, std::string>>;
  std::vector<LockView> ListedLocks(size_t limit, Clock::time_point now,
                                    GrantPairs* grants = nullptr) const;
  // {Redis key, value on the masters} of every lock held (value_prefix + the key's token; for
  // the leak scanner and the presence probe, which compare it with what a key holds; never
  // shown to anyone).
  std::vector<std::pair<std::string, std::string>> HeldGrants() const;
  // The `limit` longest-waiting acquires queued here, longest waiting first (so the first is
  // the oldest wait); waiters whose session closed or whose wait ran out (an attempt still in
  // flight) are not listed. O(limit + such waiters).
  std::vector<WaiterView> AllWaiters(size_t limit) const;
  // Acquire requests queued across all resources (each resource's contender included).
  size_t waiters() const { return waiter_index_.size(); }
  size_t holds() const { return holds_; }

 private:
  // A hold in by_age_: ordered by acquired, then resource name, then serial (ListedLocks'
  // order). A hold's acquired and serial do not change while it is installed.
  struct HoldEntry {
    Clock::time_point acquired;
    const std::string* name;
    uint64_t serial;
    const Resource* resource;
    const Holder* holder;
    bool operator<(const HoldEntry& o) const {
      if (acquired != o.acquired) return acquired < o.acquired;
      if (*name != *o.name) return *name < *o.name;
      return serial < o.serial;
    }
  };

  std::unordered_map<uint64_t, std::string>* touched_ = nullptr;
  // A hold that counts as stuck however young: not renewing, with a ttl over stuck_after.
  bool Quiet(const Holder& h) const { return !h.renew && h.ttl_ms > stuck_after_ms_; }
  LockView ViewOf(const std::string& name, const Resource& r, const Holder& h,
                  Clock::time_point now) const;

  std::string key_prefix_, fence_prefix_, value_prefix_;
  bool mark_readers_ = false, native_claims_ = false;
  std::unordered_map<std::string, std::unique_ptr<Resource>> resources_;
  std::unique_ptr<SessionTable> own_sessions_;  // null when given one
  SessionTable& sessions_;
  size_t holds_ = 0;
  int64_t stuck_after_ms_;
  // Kept as holds are installed and taken, and waiters queued and removed: the bounded views
  // (ListedLocks, AllWaiters) and the counts cost what they return, not the locks held.
  std::set<HoldEntry> by_age_;
  std::set<HoldEntry> quiet_;  // the Quiet holds, in the same order
  WaiterIndex waiter_index_;
};

}  // namespace lw
