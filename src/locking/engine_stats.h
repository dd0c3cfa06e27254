#pragma once
// EngineStats: every metric the lock engine counts, declared where it is counted (see
// stats/stats.h). The engine and its parts (Rounds, renewal, fencing, hand-off) bump these
// members directly; docs/metrics.md describes each family.

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/lock_kind.h"
#include "locking/engine_events.h"
#include "stats/stats.h"

namespace lw {

enum class RenewOutcome { kExtended, kRetry, kLost, kCount };
// Phase 2 of a fenced acquire: its fence was written on the fence quorum (a fenced grant, if
// validity was left); it was not (the key had gone from too many masters, or too few answered);
// or a master's counter was already at or above the new fence (never expected: the counter was
// raised outside lockwarden, or masters that confirmed an earlier fence lost their data).
enum class FenceOutcome { kWritten, kNotConfirmed, kCounterAhead, kCount };
// Why a lock was taken away from its holder.
enum class LossReason { kRenewFailed, kExpired, kRevoked, kCount };
// A resume (LockEngine::Resume): confirmed and held; not_held (the masters do not hold it for
// that token any more); or not decided (too few masters answered, or refused before asking).
enum class ResumeOutcome { kResumed, kNotHeld, kFailed, kCount };

inline constexpr std::array<std::string_view, 4> kAcquireOutcomeNames = {"acquired", "timeout",
                                                                         "no_quorum", "error"};
inline constexpr std::array<std::string_view, 3> kRenewOutcomeNames = {"extended", "retry", "lost"};
inline constexpr std::array<std::string_view, 3> kFenceOutcomeNames = {"written", "not_confirmed",
                                                                       "counter_ahead"};
inline constexpr std::array<std::string_view, 3> kResumeOutcomeNames = {"resumed", "not_held",
                                                                      "failed"};
// Also the `reason` of lost events (EngineEvents::Lost).
inline constexpr std::array<std::string_view, 3> kLossReasonNames = {"renew_failed", "expired",
                                                                     "revoked"};

// By HoldMode (core/lock_kind.h), in its order.
inline constexpr std::array<std::string_view, 3> kHoldModeNames = {"exclusive", "shared", "permit"};

inline std::string_view NameOf(LossReason r) { return kLossReasonNames[static_cast<size_t>(r)]; }

struct EngineStats {
  // masters: "host:port" of every master in configuration order (the engine's node order).
  EngineStats(stats::Registry& r, const std::vector<std::string>& masters);

  static const stats::Buckets kWaitBuckets;
  static const stats::Buckets kAttemptBuckets;
  static const stats::Buckets kHoldBuckets;

  stats::Registry& r_;
  stats::ByEnum<stats::Histogram, AcquireOutcome> acquire_wait{r_, "lockwarden_acquire_wait_seconds", "Time from an acquire request to its reply, by outcome.", "outcome", kAcquireOutcomeNames, {}, kWaitBuckets};
  stats::Histogram acquire_attempts{r_, "lockwarden_acquire_attempts", "Redlock rounds one acquire request needed.", kAttemptBuckets};
  stats::Histogram hold{r_, "lockwarden_lock_hold_seconds", "How long granted locks were held (grant to release, loss or close).", kHoldBuckets};
  stats::ByEnum<stats::Counter, RenewOutcome> renewals{r_, "lockwarden_renewals_total", "Automatic renewals by outcome.", "outcome", kRenewOutcomeNames};
  stats::Counter local_handoffs{r_, "lockwarden_local_handoffs_total", "Releases that handed the lock to the next local waiter without a round trip to the masters (the key stays set; docs/safety.md)."};
  stats::ByEnum<stats::Counter, FenceOutcome> fence_rounds{r_, "lockwarden_fence_rounds_total", "Fence writes (phase 2 of a fenced acquire) by outcome; counter_ahead should stay 0 (docs/safety.md).", "outcome", kFenceOutcomeNames};
  stats::ByEnum<stats::Counter, LossReason> locks_lost{r_, "lockwarden_locks_lost_total", "Locks taken away from their holder, by reason.", "reason", kLossReasonNames};
  // A lost lock is also a failed `lock` request (the socket server counts the other failures).
  stats::Counter lost_failures{r_, "lockwarden_failures_total", "Failed requests by op and error code; op=lock reason=lost counts lost locks.", {{"op", "lock"}, {"reason", "lost"}}};
  // By mode: exclusive (a mutex, or a read-write lock's write hold), shared (a read hold),
  // permit (a semaphore's). No resource label: resources are unbounded.
  stats::ByEnum<stats::Gauge, HoldMode, 3> holds{r_, "lockwarden_holds", "Holds granted through this agent now, by mode: exclusive (a mutex or a write hold), shared (a read hold), permit (a semaphore's).", "mode", kHoldModeNames};
  stats::ByEnum<stats::Histogram, HoldMode, 3> grant_wait{r_, "lockwarden_grant_wait_seconds", "Time from an acquire request to its grant, by mode (a semaphore's saturation shows here).", "mode", kHoldModeNames, {}, kWaitBuckets};
  stats::Counter handoffs_in_turn{r_, "lockwarden_handoffs_in_turn_total", "Releases with a local waiter next that went through the masters rather than hand it the lock, because a waiter on another agent may have come first (docs/safety.md, Fair turns)."};
  stats::ByEnum<stats::Counter, ResumeOutcome> resumes{r_, "lockwarden_resumes_total", "Holds of an earlier run of this agent that a client asked to resume, by outcome (docs/safety.md, Resume).", "outcome", kResumeOutcomeNames};
  stats::Gauge native_claims{r_, "lockwarden_native_claims", "1 while plain exclusive acquires go to the masters as SET NX PX first: this agent marks read holds and every agent of the fleet has done so for max_ttl_ms (docs/safety.md, Marked readers); 0 while they go as the claim script."};
  stats::Gauge marks_readers{r_, "lockwarden_marks_readers", "1 while this agent's read holds leave the readers' mark at the resource's key: always with mark_readers, and without it until the fleet registry has listed this agent as unmarked for about 4/3 of a heartbeat ttl (docs/safety.md, Marked readers)."};
  stats::Counter release_wakeups{r_, "lockwarden_release_wakeups_total", "Waiters woken early by a release announced by another agent."};
  // By master index: the master had not answered a round when its node timeout ended it.
  std::vector<std::unique_ptr<stats::Counter>> master_timeouts;

  // Counts one acquire answered (its wait and rounds).
  void AcquireAnswered(AcquireOutcome outcome, std::chrono::nanoseconds waited, int attempts) {
    acquire_wait[outcome].ObserveSeconds(waited);
    acquire_attempts.Observe(attempts);
  }
  void LockLost(LossReason reason) {
    locks_lost[reason].Inc();
    lost_failures.Inc();
  }
  void MasterMissedDeadline(size_t index) {
    if (index < master_timeouts.size()) master_timeouts[index]->Inc();
  }
};

}  // namespace lw
