#pragma once
// One lock as every reader sees it: the engine fills what it knows, the agent adds the holder's
// peer, and the socket (`locks`), the snapshot, the admin API and the page all read this one
// struct. A new field on the page is a field here, its filling, and its rendering.

#include <cstdint>
#include <optional>
#include <string>

#include "core/election_record.h"
#include "core/lock_kind.h"
#include "core/session_id.h"

namespace lw {

// Who is at the other end of a session: SO_PEERCRED and /proc/PID/cmdline at connect time.
struct Peer {
  int pid = -1;  // -1: unknown, or the session is gone
  int uid = -1;
  int gid = -1;
  std::string cmdline;  // printable, at most 512 bytes; "" if unknown
};

// A lock held through this agent, for operators: never its token.
struct LockView {
  std::string resource;
  SessionId session = 0;
  int64_t held_ms = 0;
  int64_t validity_ms = 0;
  bool renew = false;
  int waiters = 0;     // local acquires queued behind it
  int64_t ttl_ms = 0;  // as requested (renewals extend by the same)
  std::string key;     // the Redis key of this hold (a permit's, the writer's, the readers set)
  std::optional<int64_t> fence;
  Peer holder;  // filled by the agent (the engine knows sessions, not peers)
  // What the resource is (a semaphore's permits, a lock's holds, an election's leader).
  LockKind kind = LockKind::kMutex;
  // An election's leader (kind kElection): its record as written beside the hold (term = the
  // fence; payload: what the campaign said of itself). nullopt for other kinds.
  std::optional<ElectionRecord> election = std::nullopt;
  // Which kind of hold: a mutex's (exclusive), a semaphore's permit, a read or a write hold.
  HoldMode mode = HoldMode::kExclusive;
  int permits = 1;  // semaphores: K
  int permit = -1;  // semaphores: which permit this hold is
  int holds = 1;    // holds of this resource through this agent (n of K; readers)
  uint64_t hold = 0;  // which hold in this agent (Grant::hold): tells a session's holds apart
  // A detached lease (acquire "detach": true): session is its uid's lease session, and holder
  // is its creator as it was at the acquire (pid, uid, gid, command line).
  bool detached = false;
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
