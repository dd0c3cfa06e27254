#pragma once
// What the lock engine reports to metrics. Called on the loop thread at the moment each event
// happens; implementations must be cheap and must not call back into the engine.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error_code.h"

namespace lw {

enum class AcquireOutcome { kAcquired, kTimeout, kNoQuorum, kError, kCount };
enum class RenewOutcome { kExtended, kRetry, kLost, kCount };
// Phase 2 of a fenced acquire: its fence was written on the fence quorum (a fenced grant, if
// validity was left); it was not (the key had gone from too many masters, or too few answered);
// or a master's counter was already at or above the new fence (never expected: the counter was
// raised outside lockwarden, or masters that confirmed an earlier fence lost their data).
enum class FenceOutcome { kWritten, kNotConfirmed, kCounterAhead, kCount };

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // An acquire request was answered: how long it waited, and how many Redlock rounds it ran
  // (0: it timed out queued behind a local holder).
  virtual void AcquireFinished(AcquireOutcome /*outcome*/, std::chrono::nanoseconds /*waited*/,
                               int /*attempts*/) {}
  // An acquire request of `session` for `resource` was refused (any outcome but acquired);
  // called right after AcquireFinished.
  virtual void AcquireFailed(uint64_t /*session*/, std::string_view /*resource*/,
                             ErrorCode /*code*/) {}
  // A granted lock ended (released, lost, its session closed, shutdown) after `held`.
  virtual void HoldEnded(std::chrono::nanoseconds /*held*/) {}
  virtual void Renewed(RenewOutcome /*outcome*/) {}
  // A release handed the masters' key straight to the next local waiter (no round trip).
  virtual void LocalHandOff() {}
  virtual void FenceRound(FenceOutcome /*outcome*/) {}
  // reason: "renew_failed", "expired" or "revoked".
  virtual void LockLost(std::string_view /*reason*/) {}
  // Master `index` had not answered a round when its node timeout ended the round.
  virtual void MasterMissedDeadline(size_t /*index*/) {}
};

// The observer used when none is given.
EngineObserver& SilentEngineObserver();

}  // namespace lw
