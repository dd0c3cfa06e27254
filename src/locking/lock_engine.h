#pragma once
// LockEngine: Redlock across N masters, for many local sessions, on one event-loop thread
// (docs/safety.md argues each rule).
//
// - Acquire: waiters for a resource queue FIFO here; only the front contends, sending its
//   kind's acquire with a fresh token to every master at once. A quorum of yes votes with
//   validity = ttl - elapsed - drift > 0 grants it; otherwise it is undone on every master and
//   retried after a jittered delay until wait_ms ends.
// - Release: compare-and-delete everywhere, or a local hand-off (MayHandOff); the next local
//   waiter's attempt is pipelined behind the delete on each connection.
// - Extend / renew: compare-and-pexpire everywhere, counted only with a quorum before the
//   validity ran out; a renewed lock that cannot be extended in time is lost (EngineEvents).
// - Fenced acquire: two phases (locking/fencing.h); the grant needs the fence quorum in both
//   and validity left after both.
// - Restart quarantine: a master whose votes do not count still gets every command (Rounds).
// - Kinds (locking/kinds/kind.h): a resource's shape picks the Kind the engine asks which part
//   an acquire takes, who may contend beside what is held, which rounds to send and what a
//   refusal means. An acquire naming another shape gets kind_mismatch. The engine names no kind.
// - A grant's validity is decided once, as its callback is called; one that ran out first is
//   released everywhere and fails with no_quorum (ValidityRanOutBeforeReply).
//
// The parts, each in its own file: ResourceTable (the books and views), Rounds (one command to
// every master, votes counted), WaitQueue, ResourceDeadlines, RenewalSlots, fencing, MayHandOff,
// Turns (fair turns with other agents), failure_text, EngineStats, EngineEvents, EngineOptions.
//
// Loop thread only. Callbacks are never invoked synchronously from inside the call that takes
// them, and must not destroy the engine.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "core/defaults.h"
#include "core/error_code.h"
#include "core/lock_view.h"
#include "core/result.h"
#include "core/session_id.h"
#include "core/lock_kind.h"
#include "locking/deadline_queue.h"
#include "locking/engine_calls.h"
#include "locking/engine_options.h"
#include "locking/engine_events.h"
#include "locking/engine_stats.h"
#include "locking/fencing.h"
#include "locking/holder.h"
#include "locking/kinds/kind.h"
#include "locking/renewal.h"
#include "locking/renewer.h"
#include "locking/resource_table.h"
#include "locking/rounds.h"
#include "locking/turns.h"
#include "locking/waiters.h"
#include "redis/node.h"
#include "redis/release_watch.h"
#include "redis/timer.h"

namespace lw {

class LockEngine : private Renewer::Holds {
 public:
  LockEngine(uv_loop_t* loop, std::vector<Node*> nodes, EngineOptions options);
  ~LockEngine() override;
  LockEngine(const LockEngine&) = delete;
  LockEngine& operator=(const LockEngine&) = delete;

  // Arguments are assumed validated by the protocol layer (name, ttl and wait ranges).
  // fence: also issue a fencing token (Grant::fence).
  void Acquire(SessionId session, const std::string& resource, int64_t ttl_ms, int64_t wait_ms,
               bool renew, AcquireDone done, bool fence = false, AcquireKind kind = {});
  void Release(SessionId session, const std::string& resource, const std::string& token,
               ReleaseDone done);
  // A release of a reentrant hold that stands for more than one acquire: one less, and the
  // depth left (the hold stays, nothing is sent); nullopt when `token` of `session` holds
  // `resource` once (then Release lets go of it) or not at all.
  std::optional<int> Unwind(SessionId session, const std::string& resource,
                            const std::string& token);
  // Whether some hold stands for more than one acquire (an older hand-over format drops depth).
  bool AnyReentered() const;
  void Extend(SessionId session, const std::string& resource, const std::string& token,
              int64_t ttl_ms, ExtendDone done);
  // What is held and queued here, by resource and by session, and the views of it.
  const ResourceTable& books() const { return table_; }

  // The session is gone: release its locks on all masters now and drop its waiters
  // (their callbacks are not called).
  void CloseSession(SessionId session);

  // An operator takes the lock away from its holders (every hold of it): their keys are deleted
  // on every master (with their tokens), each holder is told `lost` with reason "revoked", and
  // the next local waiter gets its turn. nullopt: nobody holds `resource` through this engine.
  using Revocation = lw::Revocation;
  using RevokeDone = lw::RevokeDone;
  void Revoke(const std::string& resource, RevokeDone done);
  // The same for one hold, only if the hold `key` names (Kind::HoldKey) is held through this
  // engine with exactly `value` on the masters (value_prefix + its token): a revoke decided
  // elsewhere, by the value read from the masters, never takes a lock granted again since.
  void RevokeGrant(const std::string& key, const std::string& value, RevokeDone done);

  // Another agent released `key` (heard through ReleaseWatch): a local waiter backing off for
  // it tries again now (counted in EngineStats::release_wakeups). Keys this engine has no
  // waiter for are ignored. True if a waiter woke.
  bool ReleasedElsewhere(const std::string& key);

  // Refuse new work, fail waiters with shutting_down, release every lock (release: else every
  // lock is left on the masters until its ttl, for a resume through the agent's next run), and
  // call `done` once every round in flight has ended (each ends within the node timeout).
  void Shutdown(std::function<void()> done, bool release = true);

  // A hold granted through an earlier run of this agent (the same value prefix: the agent id
  // outlives its process) taken over by `session`, which proves it by the token: confirmed on
  // the masters exactly as an extend by ttl_ms is (compare-and-pexpire of the key holding
  // value_prefix + token, a quorum within the round, validity counted from its start), then
  // held, renewed and released as if granted here. Anything not confirmed is answered
  // not_held, and the value is deleted wherever it is left; no_quorum (masters unreachable)
  // leaves it for another try. A lease session's resume (core/session_id.h) adopts a detached
  // lease. docs/safety.md "Resume".
  using ResumeAsk = lw::ResumeAsk;
  void Resume(SessionId session, ResumeAsk ask, AcquireDone done);

  // ---- an in-place upgrade (lock_engine_handover.cc, docs/upgrade.md)
  // Every hold, by session, as the next process takes it over (one pass over the books).
  std::unordered_map<SessionId, std::vector<HandedHold>> HoldsBySession() const;
  // Drops every waiter without answering it (an attempt in flight is undone when it ends, as
  // for a closed session), for its request to be asked again; returns how many.
  size_t DropWaiters();
  // An acquire attempt's round is in flight somewhere (its win would still be undone).
  bool AttemptsInFlight() const;
  // Takes over a hold handed from the previous process, with no round trip: its validity is
  // the one that process counted (CLOCK_MONOTONIC is the host's), renewed on the same schedule.
  // A failure: not taken (validity ran out, or the resource is of another kind here).
  std::optional<Failure> Adopt(SessionId session, const HandedHold& hold);
  // A pre-copied upgrade (docs/upgrade.md, "Pre-copy"). The old process: the holds of one
  // session; the holds that change from now on, tracked (ResourceTable::TrackChanges; null:
  // stop); and at the hand-over, what changed: of the `touched` holds, each held now goes as
  // an update when `copied` has its serial, in full otherwise (by session), and each copied one
  // held no more is `gone`. Its cost is that of the changes, not of the holds.
  std::vector<HandedHold> HoldsOf(SessionId session) const;
  void TrackChanges(std::unordered_map<uint64_t, std::string>* touched) {
    table_.TrackChanges(touched);
  }
  void ChangesSince(const std::unordered_set<uint64_t>& copied,
                    const std::unordered_map<uint64_t, std::string>& touched,
                    std::unordered_map<SessionId, std::vector<HandedHold>>* full,
                    std::unordered_map<SessionId, std::vector<HoldUpdate>>* updates,
                    std::vector<uint64_t>* gone) const;
  // The next process: a pre-copied hold entered (whatever its validity; the hand-over decides),
  // answering the hold here, which stays put until UpdateStaged or DropStaged (nothing else
  // runs meanwhile: the process reads the hand-over channel); then brought up to date, or
  // dropped (nothing is sent: the previous process released or lost it).
  std::variant<const Holder*, Failure> Stage(SessionId session, const HandedHold& hold);
  // Every hold of `session`: visit(resource name, its resource, the hold).
  void VisitHolds(SessionId session,
                  const std::function<void(const std::string&, const Resource&, const Holder&)>&
                      visit) const;
  void UpdateStaged(const std::string& name, const Holder* staged, const HoldUpdate& now);
  void DropStaged(const std::string& name, const Holder* staged);

  // The key layout the fleet presence found (docs/safety.md §7; fleet::FleetPresence::Layout):
  // whether read holds leave the readers' mark, and whether a plain exclusive acquire may be
  // sent as a native SET NX PX first: only while they do, and only until `native_until` (a
  // verdict the next heartbeat did not renew in time runs out). Takes effect for the next
  // attempt or renewal.
  void SetLayout(bool mark_readers, bool native, Clock::time_point native_until);
  // SetLayout with the readers marked, native claims until further notice or not at all.
  void SetNativeClaims(bool on) { SetLayout(true, on, Clock::time_point::max()); }
  bool native_claims() const { return native_claims_; }

  int quorum() const { return rounds_.quorum(); }
  int fence_quorum() const { return fence_quorum_; }
  std::vector<NodeStatus> NodeStatuses() const;
  size_t locks_held() const { return table_.holds(); }
  // Acquire requests queued across all resources (each resource's contender included).
  size_t waiters() const { return table_.waiters(); }
  EngineStats& stats() { return *stats_; }

 private:
  // What a round of an acquire attempt is for.
  struct AttemptRound {
    std::string name;
    uint64_t waiter_id;
    std::string token;
    HoldMode mode;
    int part = -1;
    int attempt = 1;
    std::string note;  // what the kind wrote beside the hold (phase 2 on), Holder::note
    // It takes turns: refused, it queues this agent; granted, it says how long other agents
    // wait (Resource::others).
    bool ask_others = false;
  };

  std::string KeyOf(const std::string& name) const;  // the resource's base key
  // The call a kind gets for attempt `a` of r's front (place refers to a and r).
  AttemptCall CallOf(const AttemptRound& a, const Resource& r, const HoldPlace& place) const;
  HoldPlace PlaceOf(const AttemptRound& a, const Resource& r) const;
  Resource* Find(const std::string& name) { return table_.Find(name); }
  const Resource* Find(const std::string& name) const { return table_.Find(name); }
  // ---- what the Renewer asks (Renewer::Holds)
  Holder* FindHolder(const std::string& name, const std::string& token) override {
    return table_.FindHolder(name, token);
  }
  const Holder* HolderWithSerial(const std::string& name, uint64_t serial) override;
  void ScheduleHolder(const std::string& name, Holder& h, int64_t delay_ms) override;
  void RunExtend(const std::string& name, const std::string& token, int64_t ttl_ms,
                 ExtendDone done, int64_t timeout_ms) override;
  void Lose(const std::string& name, const std::string& token, LossReason reason) override;
  void Defer(std::function<void()> fn) override { defer_.Push(std::move(fn)); }

  // May the front waiter contend, given what is held here? (FIFO with room, as its kind says.)
  bool FrontMayContend(const Resource& r) const;
  // ---- one session's own holds (lock_engine_reentry.cc)
  // would_deadlock when the holds `session` and `owner` have of r alone would keep an acquire of
  // `mode` from contending (the kind's MayContendBeside rule): it would wait for itself.
  std::optional<Failure> OwnHoldInTheWay(const Resource& r, const std::string& name,
                                         SessionId session, uint64_t owner, HoldMode mode) const;
  // The exclusive hold of r that `session` and `owner` have (null: none).
  static Holder* OwnExclusiveHold(const Resource& r, SessionId session, uint64_t owner);
  // A reentrant acquire of a hold its asker has: one more depth, answered with the hold's grant.
  void Reenter(const std::string& name, Holder& h, AcquireDone done);

  // ---- acquire (lock_engine.cc)
  void Pump(const std::string& name);
  void StartAttempt(const std::string& name);
  // fence: phase 1 -> the highest counter read; phase 2 -> the fence written.
  void OnAttempt(const AttemptRound& a, const RoundResult& res, Clock::time_point started,
                 int64_t fence, bool fence_written);
  void WriteFence(const AttemptRound& a, Clock::time_point started, int64_t fence);
  // An attempt's hold undone on every master (giving_up: as its kind undoes a last attempt).
  void UndoAttempt(const AttemptRound& a, Resource& r, bool giving_up);
  // delay_ms: -1 for the usual jittered retry delay.
  void RetryLater(Resource& r, const std::string& name, const Waiter& w, int64_t remaining_ms,
                  int64_t delay_ms = -1);
  void GrantHead(Resource& r, const std::string& name, const AttemptRound& a,
                 Clock::time_point started, Clock::time_point valid_until,
                 std::optional<int64_t> fence);
  // Answers w with a grant of the lock r now holds for it; validity_ms > 0, computed at `now`.
  // waited_ms is counted to that same `now`: a client counts the validity from its request plus
  // waited_ms, so the two must come from one reading of the clock, or a pause of the agent
  // between two readings would lengthen the validity the client counts by that pause.
  void AnswerGrant(Waiter& w, const std::string& name, const Holder& h, int64_t validity_ms,
                   Clock::time_point now);
  // Refused at once (the engine's state is untouched): counted, reported, answered later.
  void Refuse(Failure failure, AcquireDone done);
  void FailHead(Resource& r, const std::string& name, Failure failure);
  void AnswerFailure(Waiter& w, const std::string& name, const Failure& failure);
  // Counts an answered acquire and reports it (EngineEvents); code: a refusal's.
  void Report(const Waiter& w, const std::string& name, bool granted, ErrorCode code);
  void OnWaitExpired(const std::string& name, uint64_t waiter_id);
  // A handed hold entered (Adopt, Stage): its new serial. staged: whatever its validity.
  std::variant<Holder*, Failure> InstallHanded(SessionId session, const HandedHold& hold,
                                               bool staged);
  Holder& Install(Resource& r, const std::string& name, const Waiter& w, HoldMode mode, int part,
                  Clock::time_point acquired);

  // ---- held locks (lock_engine_held.cc)
  // Release with a local waiter next in line: it takes over the masters' key as it is, with
  // no round trip, when MayHandOff says so. False: go through Redis.
  bool LocalHandOff(Resource& r, const std::string& name, const Holder& prev);
  void OnExtendRound(const std::string& name, const std::string& token, int64_t ttl_ms,
                     const RoundResult& res, const ExtendDone& done);
  void SetDeadline(uint64_t serial, const std::string& name, Clock::time_point due);
  void OnDeadline(uint64_t serial, const std::string& name);
  std::unique_ptr<Holder> TakeHolder(Resource& r, const std::string& name, const Holder* h);
  // The release round of hold h (taken from r): in turn when it takes turns, with this agent's
  // next waiter (docs/safety.md, "Fair turns").
  RoundRequest HolderRelease(const std::string& name, const Resource& r, const Holder& h) const;
  // The hold h (taken from r) released on every master.
  void ReleaseEverywhere(const std::string& name, const Resource& r, const Holder& h);
  // Turns::Leave and Turns::Ask of r (named `name`), run.
  void LeaveQueue(const std::string& name, Resource& r);
  void AskOthers(const std::string& name, Resource& r);
  void ReleaseEverywhere(RoundRequest release);
  // Revoke of the holds in `holds` (each held in r).
  void RevokeHeld(Resource& r, const std::string& name, std::vector<const Holder*> holds,
                  RevokeDone done);

  // ---- detached leases across the fleet (lock_engine_leases.cc)
  // h is an exclusive detached lease of a mutex: its key is P R, taken over by token.
  static bool IsFleetLease(const Resource& r, const Holder& h);
  // Every hold of r here is such a lease: the queue's front contends on the masters anyway
  // (a lease may have ended through another agent; the masters decide).
  static bool OnlyFleetLeasesHeld(const Resource& r);
  // kTakeLease of lease h (held in r) for ttl_ms.
  RoundRequest TakeLeaseRound(const std::string& name, const Resource& r, const Holder& h,
                              int64_t ttl_ms) const;
  // A grant through the masters (`granted`, held in r) ends every lease of r still listed
  // here: a quorum no longer holds them.
  void DropStaleLeases(Resource& r, const std::string& name, const Holder& granted);

  // ---- resume (lock_engine_resume.cc)
  // Resume's confirm_first: the lease taken over (kTakeLease) with nothing entered in the
  // books; a quorum's yes goes on to Resume, anything else is answered as Resume answers it.
  void ConfirmThenResume(SessionId session, ResumeAsk ask, AcquireDone done);
  // A leadership's resume: its record read from every master (ResumeAsk::record), then Resume.
  void ReadRecordThenResume(SessionId session, ResumeAsk ask, AcquireDone done);

  // ---- sessions, shutdown (lock_engine_sessions.cc)
  void ForgetWaiter(SessionId session, const std::string& name);
  void MaybeErase(const std::string& name);
  void MaybeFinishShutdown();

  uv_loop_t* loop_;
  EngineOptions options_;
  std::unique_ptr<stats::Registry> own_registry_;  // when options.stats is null
  std::unique_ptr<EngineStats> own_stats_;
  EngineStats* stats_;
  EngineEvents* events_;
  Rounds rounds_;
  int fence_quorum_;
  ResourceTable table_;
  uint64_t next_waiter_id_ = 1;
  std::mt19937_64 rng_;
  ResourceDeadlines deadlines_;
  bool shutting_down_ = false;
  bool native_claims_ = false;
  Clock::time_point native_until_{};
  Renewer renewer_{*this, *stats_, options_};
  Turns turns_{options_};
  std::function<void()> shutdown_done_;
  DeferQueue defer_;  // runs callbacks that must not be synchronous
};

}  // namespace lw
