#pragma once
// What the lock engine tells the rest of the agent as it happens: the events an operator or a
// client cares about. Counts and durations are not here: the engine counts them itself in
// EngineStats (locking/engine_stats.h).
//
// Called on the loop thread at the moment each event happens, never from inside the engine
// call that caused it unless said otherwise; implementations must be cheap and must not
// destroy the engine. Every method defaults to doing nothing.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/error_code.h"
#include "core/session_id.h"

namespace lw {

// How an acquire request was answered.
enum class AcquireOutcome { kAcquired, kTimeout, kNoQuorum, kError, kCount };

class EngineEvents {
 public:
  virtual ~EngineEvents() = default;
  // A lock was taken away from its holder `session`; `token` is the grant's. reason:
  // "renew_failed", "expired" or "revoked".
  virtual void Lost(SessionId /*session*/, const std::string& /*resource*/,
                    const std::string& /*token*/, std::string_view /*reason*/) {}
  // An acquire request was answered: how long it waited, and how many Redlock rounds it ran
  // (0: it was answered queued behind a local holder).
  virtual void AcquireFinished(AcquireOutcome /*outcome*/, std::chrono::nanoseconds /*waited*/,
                               int /*attempts*/) {}
  // An acquire request of `session` for `resource` was refused (any outcome but acquired);
  // called right after AcquireFinished.
  virtual void AcquireFailed(SessionId /*session*/, std::string_view /*resource*/,
                             ErrorCode /*code*/) {}
};

}  // namespace lw
