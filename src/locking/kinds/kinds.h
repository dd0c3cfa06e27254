#pragma once
// The kinds this agent knows, as classes (KindOf in registry.cc hands them out). Their
// arguments are in docs/safety.md; their keys in core/lock_kind.h.

#include "locking/kinds/kind.h"

namespace lw::kinds {

// A lock: exclusive holds, and shared (read) holds beside each other: a read-write lock. An
// exclusive acquire refused because readers hold leaves its writer-waiting mark (the value of
// its first attempt, kept in its state), so that new readers wait behind it.
class ReadWrite : public Kind {
 public:
  HoldMode ModeAsked(bool shared) const override;
  // Both holds queue; only an exclusive one's release reserves (a reader's frees nothing).
  bool TakesTurns(HoldMode /*mode*/) const override { return true; }
  bool MayContendBeside(const LockShape& shape, HoldMode mode, const Holders& held) const override;
  RoundRequest AcquireRound(const AttemptCall& a, KindSlot& state) const override;
  void Heard(const RoundResult& res, KindSlot& state, uint64_t waiter) const override;
  RoundRequest UndoRound(const AttemptCall& a, const KindSlot& state,
                         bool giving_up) const override;
  std::optional<RoundRequest> Granted(const AttemptCall& a, KindSlot& state) const override;
  std::string HoldKey(const HoldPlace& p) const override;
  RoundRequest ExtendRound(const HoldPlace& p, const std::string& token,
                           int64_t ttl_ms) const override;
  RoundRequest ReleaseRound(const HoldPlace& p, const std::string& token) const override;
  RoundRequest ReleaseTurn(const HoldPlace& p, const std::string& token,
                           const std::string& value_prefix, const Turn& turn) const override;
};

// A semaphore of K permits: each permit a mutex of its own beside the marker at the base key.
class Semaphore : public Kind {
 public:
  HoldMode ModeAsked(bool shared) const override;
  bool MayContendBeside(const LockShape& shape, HoldMode mode, const Holders& held) const override;
  int ChoosePart(const LockShape& shape, KindSlot& state, const Holders& held,
                 std::mt19937_64& rng) const override;
  RoundRequest AcquireRound(const AttemptCall& a, KindSlot& state) const override;
  RefusalReading Refused(const RoundResult& res, const LockShape& shape, KindSlot& state,
                         uint64_t waiter, int quorum, bool may_retry_now) const override;
  RoundRequest UndoRound(const AttemptCall& a, const KindSlot& state,
                         bool giving_up) const override;
  std::optional<RoundRequest> Granted(const AttemptCall& a, KindSlot& state) const override;
  std::string HoldKey(const HoldPlace& p) const override;
  std::string FenceKey(const HoldPlace& p) const override;
  RoundRequest ExtendRound(const HoldPlace& p, const std::string& token,
                           int64_t ttl_ms) const override;
  RoundRequest ReleaseRound(const HoldPlace& p, const std::string& token) const override;
  bool TakesTurns(HoldMode /*mode*/) const override { return true; }
  RoundRequest ReleaseTurn(const HoldPlace& p, const std::string& token,
                           const std::string& value_prefix, const Turn& turn) const override;
};

// An election: a lock whose exclusive holder is the leader, always fenced (the fence is its
// term), with the leader's record beside the hold (written in phase 2, kept as Holder::note).
class Election : public Kind {
 public:
  bool AlwaysFenced() const override { return true; }
  bool TakesTurns(HoldMode /*mode*/) const override { return true; }
  RoundRequest AcquireRound(const AttemptCall& a, KindSlot& state) const override;
  RoundRequest FenceRound(const AttemptCall& a, int64_t fence, int64_t unix_ms,
                          const std::string& payload, std::string* note) const override;
  RoundRequest ExtendRound(const HoldPlace& p, const std::string& token,
                           int64_t ttl_ms) const override;
  RoundRequest ReleaseRound(const HoldPlace& p, const std::string& token) const override;
  RoundRequest ReleaseTurn(const HoldPlace& p, const std::string& token,
                           const std::string& value_prefix, const Turn& turn) const override;
  void Describe(const Holder& h, LockView& view) const override;
};

// The exclusive claim (kClaimExclusive) of a lock's key with writer-waiting mark `mark` ("" for
// none; may_hold_mark: an earlier attempt may have left it, so a grant removes it).
RoundRequest ClaimExclusive(const AttemptCall& a, const std::string& mark, bool may_hold_mark);
// Shared by the kinds: phase 1's fence key appended to an acquire round (a.fence_needed > 0),
// and the round's key and ttl set.
RoundRequest Finish(RoundRequest req, const AttemptCall& a, const std::string& hold_key,
                    const std::string& fence_key);
// A release of `hold_key` (kReleasePart) that also drops writer-waiting mark `drop_mark` if it
// is still there ("": none), announcing the release on the base key's channel.
RoundRequest ReleasePart(const HoldPlace& p, const std::string& token,
                         const std::string& hold_key, const std::string& second_key,
                         const std::string& drop_mark);
// An exclusive hold's release in turn (kReleaseTurn): as ReleasePart of the base key, and where
// another agent waits, the lock left reserved for the agent whose waiter came first.
// hold_key: P R, or a permit's key (whose marker is then kept at least as long as a
// reservation of it). record: an election's leader record, dropped at record_key where it is
// exactly that ("": none).
RoundRequest ReleaseInTurn(const HoldPlace& p, const std::string& token,
                           const std::string& hold_key, const std::string& record_key,
                           const std::string& record, const std::string& value_prefix,
                           const Turn& turn);
// This agent's queue entry for the resource at p removed (kLeaveQueue; every master).
RoundRequest LeaveQueue(const HoldPlace& p, const std::string& value_prefix);
// How long other agents' oldest waiters for the resource at p have waited, as each master says
// (kQueueHead, a read: RoundResult::values, nil where nobody waits; every master).
RoundRequest QueueHead(const HoldPlace& p, const std::string& value_prefix);
// A detached lease at p's base key taken over for ttl_ms (kTakeLease): where the key holds any
// agent's value for `token`, it becomes this agent's. The lease's extend, and the step before
// its release; votes as an extend.
RoundRequest TakeLease(const HoldPlace& p, const std::string& token, int64_t ttl_ms);

}  // namespace lw::kinds
