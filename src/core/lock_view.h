#pragma once
// The locks of this agent as its readers see them: the socket (`locks`, `held`), the snapshot,
// the admin API and the page. What a hold is to every reader is core/hold.h; a LockView adds
// what only this agent knows of it.

#include <cstdint>
#include <optional>
#include <string>

#include "core/hold.h"
#include "core/lock_kind.h"
#include "core/session_id.h"

namespace lw {

// A lock held through this agent, for operators: never its token. The engine fills what it
// knows, the agent adds the holder (LockService::FillHolder: the engine knows sessions, not
// peers) and the wall clock's held since.
struct LockView : Hold {
  // The session that holds it; a detached lease's is its uid's lease session.
  SessionId session = 0;
  int64_t held_ms = 0;      // how long, by this agent's steady clock, when the view was taken
  int64_t validity_ms = 0;  // how long this agent's grant is still valid then
  std::string key;  // the Redis key of this hold (a permit's, the writer's, the readers set)
  int holds = 1;            // holds of this resource through this agent (n of K; readers)
  uint64_t hold = 0;        // which hold in this agent (Grant::hold): tells a session's holds apart
};

// An acquire queued at this agent, for operators.
struct WaiterView {
  std::string resource;
  SessionId session = 0;
  int64_t waited_ms = 0;  // since the request arrived
  int64_t wait_ms = 0;    // as requested: how long it may wait in all
  Peer peer;              // filled by the agent
  HoldMode mode = HoldMode::kExclusive;  // what it asks for
  int permits = 1;                       // semaphores: K
};

// A lock as its own session sees it (`held`): with its token.
struct HeldLock {
  std::string resource;
  std::string token;
  int64_t validity_ms = 0;
  bool renew = false;
  HoldMode mode = HoldMode::kExclusive;
  int permits = 1;
  int permit = -1;
  LockKind kind = LockKind::kMutex;  // an election's leadership, or a lock's or semaphore's hold
};

}  // namespace lw
