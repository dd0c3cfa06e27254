#pragma once
// Kind: a lock kind as a part the engine calls. The engine (locking/lock_engine.h) owns what
// every kind shares: the FIFO queue, rounds and votes, validity, renewal, fencing's two phases,
// local hand-off timing, sessions and views. It asks the resource's kind only the kind's
// questions, here:
//   - which part of the resource an acquire asks for, and whether it is always fenced;
//   - may the queue's front contend now, given what is held through this agent;
//   - which part an attempt takes, which round it sends, what the masters' refusal means
//     (why, retry at once, a resource of another kind), what undoing it and granting it send;
//   - where a hold lives, and what extending, releasing and describing it take.
// Per-kind state lives with the kind: KindState (a resource's, created by its kind on first use)
// and Holder::note (a hold's). A new kind is a class here, its row in KindOf (registry.cc), its
// scripts (redis/kind_scripts.h) and its key parts (core/lock_kind.h).
//
// Kinds are stateless singletons; every method is pure (no I/O, no clock). Loop thread only.

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/lock_kind.h"
#include "core/lock_view.h"
#include "core/session_id.h"
#include "locking/claims.h"
#include "locking/holder.h"
#include "locking/rounds.h"

namespace lw {

// What an acquire asks for beyond ttl and wait: the resource's shape and the kind's request.
struct AcquireKind {
  LockShape shape;
  bool shared = false;  // a read hold (kinds without one ignore it)
  // Once granted, the hold belongs to this session rather than the acquiring one (0: the
  // acquiring one), and it is left on the masters at Shutdown (it ends by release or ttl, not
  // with the agent). The waiter still belongs to the acquiring session (closing it drops the
  // wait).
  SessionId hold_as = 0;
  // What the kind stores with a grant (an election's candidate payload, core/election_record.h).
  std::string payload;
  // Who inside the session asks (a thread, a task; 0: the session itself): an acquire that could
  // only wait for holds of the same session and owner is refused (would_deadlock), or, when
  // `reentrant` and one of them is exclusive, that hold is taken again (Holder::depth).
  uint64_t owner = 0;
  bool reentrant = false;
};

// A resource's kind state, as its kind keeps it (each kind derives its own).
struct KindState {
  virtual ~KindState() = default;
};
using KindSlot = std::unique_ptr<KindState>;

using Holders = std::vector<std::unique_ptr<Holder>>;

// One attempt of the queue's front, as the engine starts it.
struct AttemptCall {
  const HoldPlace& place;  // its part (mode, permit) included
  const std::string& token;
  uint64_t waiter = 0;   // the waiter's id: kind state for one waiter is keyed by it
  int attempt = 1;       // 1 for the waiter's first
  int64_t ttl_ms = 0;
  int fence_needed = 0;  // > 0: phase 1 of a fenced acquire with that fence quorum
  int64_t waiting_ttl_ms = 0;  // how long a sign that the waiter waits may stay on a master
  const std::string& value_prefix;  // what every value on the masters starts with (this agent)
  // Turns (docs/safety.md, "Fair turns"): how long the front has waited (ms; -1: it takes no
  // turn and leaves no queue entry), and whether the grant should say how long other agents
  // wait (RoundResult::others_waited_ms).
  int64_t waited_ms = -1;
  bool ask_others = false;
};

// A holder's release that hands the lock on in turn (Kind::ReleaseTurn).
struct Turn {
  int64_t next_waited_ms = -1;  // how long this agent's next waiter has waited (-1: none)
  int64_t reserve_ms = 0;       // how long a reservation waits for its agent's claim
};

// What the masters' refusal of an attempt means, as its kind reads it.
struct RefusalReading {
  std::string why;  // for the failure text ("a writer holds it on 2 master(s)"); "" if nothing
  bool retry_now = false;  // try again at once (a permit a quorum reported free)
  // The resource is another kind on the masters: what was found there, for kind_mismatch.
  std::optional<std::string> foreign;
};

class Kind {
 public:
  virtual ~Kind() = default;

  // ---- the queue
  // The part an acquire asking for a shared hold (or not) occupies.
  virtual HoldMode ModeAsked(bool shared) const;
  // Every grant carries a fence (an election's term).
  virtual bool AlwaysFenced() const { return false; }
  // Acquires asking for `mode` take turns across agents: a refused one queues its agent on the
  // masters, and a release may reserve the lock for the agent whose waiter came first
  // (AcquireRound and ReleaseTurn do it). The default: no turns.
  virtual bool TakesTurns(HoldMode /*mode*/) const { return false; }
  // May the front waiter, asking for `mode`, contend while `held` (every hold of the resource
  // through this agent, never empty) are held? The default: only a free resource.
  virtual bool MayContendBeside(const LockShape& shape, HoldMode mode,
                                const Holders& held) const;

  // ---- an attempt
  // The part index an attempt of the front takes (a permit), or -1.
  virtual int ChoosePart(const LockShape& shape, KindSlot& state, const Holders& held,
                         std::mt19937_64& rng) const;
  virtual RoundRequest AcquireRound(const AttemptCall& a, KindSlot& state) const = 0;
  // Phase 2 of a fenced grant: writes `fence` where the hold is still there. The kind may keep
  // what it wrote beside the hold in *note (an election's record); "" otherwise.
  virtual RoundRequest FenceRound(const AttemptCall& a, int64_t fence, int64_t unix_ms,
                                  const std::string& payload, std::string* note) const;
  // Every round of an attempt ends here first, granted or not (the kind may note what the
  // masters said, e.g. that readers held it on some).
  virtual void Heard(const RoundResult& /*res*/, KindSlot& /*state*/, uint64_t /*waiter*/) const {}
  // The masters refused (or a quorum was not reached): what that says. may_retry_now: the
  // engine would retry at once if asked (the waiter still waits, the resource is not foreign).
  virtual RefusalReading Refused(const RoundResult& res, const LockShape& shape,
                                 KindSlot& state, uint64_t waiter, int quorum,
                                 bool may_retry_now) const;
  // The attempt's hold undone on every master; giving_up: the waiter stops contending.
  virtual RoundRequest UndoRound(const AttemptCall& a, const KindSlot& state,
                                 bool giving_up) const;
  // The front was granted: what else the masters must drop (a sign that it waited), if any.
  virtual std::optional<RoundRequest> Granted(const AttemptCall& a, KindSlot& state) const;

  // ---- a hold
  // The key a hold occupies on the masters.
  virtual std::string HoldKey(const HoldPlace& p) const { return BaseKey(p); }
  // The fence counter of a fenced hold.
  virtual std::string FenceKey(const HoldPlace& p) const { return p.fence_prefix + p.name; }
  virtual RoundRequest ExtendRound(const HoldPlace& p, const std::string& token,
                                   int64_t ttl_ms) const;
  // Waits for every master.
  virtual RoundRequest ReleaseRound(const HoldPlace& p, const std::string& token) const;
  // A holder's release that leaves the lock to the longest waiter (TakesTurns); the default is
  // ReleaseRound. value_prefix: this agent's.
  virtual RoundRequest ReleaseTurn(const HoldPlace& p, const std::string& token,
                                   const std::string& value_prefix, const Turn& turn) const;
  // What a view of the hold says beyond what every hold has (an election's record).
  virtual void Describe(const Holder& h, LockView& view) const;
};

// The kind of resources of `shape`.
const Kind& KindOf(const LockShape& shape);

}  // namespace lw
