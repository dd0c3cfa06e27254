#pragma once
// EngineOptions: what the lock engine is told at construction (built from the agent's settings),
// and the shapes of its answers to extend and release.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>

#include "core/client_session.h"
#include "core/defaults.h"
#include "core/result.h"
#include "locking/engine_events.h"
#include "locking/engine_stats.h"
#include "redis/release_watch.h"

namespace lw {

struct EngineOptions {
  std::string key_prefix = kDefaultKeyPrefix;
  std::string fence_prefix = kDefaultFencePrefix;
  int fence_quorum = 0;  // masters confirming both phases of a fenced grant; 0: FenceQuorumSize
  double drift_factor = kDefaultDriftFactor;
  int64_t node_timeout_ms = kDefaultNodeTimeoutMs;
  int64_t retry_delay_ms = kDefaultRetryDelayMs;
  int64_t retry_jitter_ms = kDefaultRetryJitterMs;
  EngineEvents* events = nullptr;  // not owned; null: nothing reported
  // Not owned; null: the engine counts into its own EngineStats on a private registry
  // (labelled with the masters' NodeStatus::addr), which nothing exports.
  EngineStats* stats = nullptr;
  // Not owned; null: waiters for a key held elsewhere only retry on their timer.
  ReleaseWatch* release_watch = nullptr;
  // What every value this engine stores on the masters starts with (the agent's "<agent id>:",
  // fleet::LockValue): a key holds value_prefix + token. Clients only ever see the token.
  std::string value_prefix;
  // Queued acquires of one resource (its contender included) beyond which Acquire fails with
  // too_many; 0: no bound.
  size_t max_waiters_per_resource = 0;
  // Exclusive holds hand the lock to this agent's next waiter first, as a lone agent would,
  // rather than taking turns with waiters on other agents (docs/safety.md, "Fair turns").
  bool local_first = false;
  // Read holds leave the readers' mark at P R (docs/safety.md §7) until LockEngine::SetLayout
  // says otherwise. Exclusive acquires are sent as a native SET NX first only once SetLayout
  // says every agent marks.
  bool mark_readers = false;
  // MayGoBeforeOthers's window (locking/handoff.h); -1: retry_delay_ms + retry_jitter_ms.
  int64_t handoff_window_ms = -1;
  // The agent's sessions, where the engine keeps what each holds and awaits. Not owned; null:
  // the engine keeps its own (sessions it is handed are then created on first use and dropped
  // by CloseSession).
  SessionTable* sessions = nullptr;
  // Holds held longer than this, or not renewing with a longer ttl, are stuck: listed first to
  // operators (ResourceTable::ListedLocks).
  int64_t stuck_after_ms = kDefaultStuckAfterMs;
};

struct Extension {
  int64_t validity_ms;
};

using ExtendDone = std::function<void(const std::variant<Extension, Failure>&)>;
using ReleaseDone = std::function<void(const std::optional<Failure>&)>;

}  // namespace lw
