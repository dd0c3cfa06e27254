#pragma once
// A hold: one holder's part of a resource, as every reader of it shares it. The agent that
// holds it makes one (LockView adds what only that agent knows), its holder report carries it
// to the masters, and the fleet table reads it back from there; protocol/hold_json.h is its one
// codec, on every wire. A new datum of a hold is a field here, its line in the codec and its
// line in the page's component (web/hold.js).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/election_record.h"
#include "core/lock_kind.h"

namespace lw {

// Who is at the other end of a session: SO_PEERCRED and /proc/PID/cmdline at connect time.
struct Peer {
  int pid = -1;  // -1: unknown, or the session is gone
  int uid = -1;
  int gid = -1;
  std::string cmdline;  // printable, at most 512 bytes; "" if unknown
  // Its parent, grandparent... at connect time (/proc/PID/stat), nearest first, at most
  // kMaxAncestors, init left out: what tells a `lockwarden lock` nested in another's command.
  std::vector<int> ancestors{};
  // On a holder report only: the outermost of `ancestors` that is a holder or waiter of the same
  // report (ActorPids), which the fleet's wait-for graph takes as the actor; -1: pid itself.
  int actor_pid = -1;
};

inline constexpr size_t kMaxAncestors = 16;

// Never a token: every reader of a hold is an operator's view.
struct Hold {
  std::string resource;
  // What the resource is (a mutex's or read-write lock's hold, a semaphore's permit, an
  // election's leader). Not on the holder report: a hold read from one is a kMutex's.
  LockKind kind = LockKind::kMutex;
  // Which part of it this hold is: a mutex's (exclusive), a semaphore's permit, a read hold.
  HoldMode mode = HoldMode::kExclusive;
  int permits = 0;  // kPermit: the semaphore's K (1..kMaxPermits); 0 otherwise or unknown
  int permit = -1;  // kPermit: which permit (0..permits-1)
  std::optional<int64_t> fence;  // fenced acquires only
  int64_t ttl_ms = 0;            // as requested (renewals extend by the same)
  bool renew = false;            // the holder's agent renews it
  // Since when, by the holder agent's wall clock; 0: not known (a fleet row whose holder's
  // agent did not report it).
  int64_t held_since_unix_ms = 0;
  int waiters = 0;  // acquires queued behind it at the holder's agent
  // Its holder. A detached lease's is its creator, as it was at the acquire.
  Peer holder;
  // A detached lease (acquire "detach": true): no connection holds it.
  bool detached = false;
  // An election's leader (kind kElection): its record as written beside the hold (term = the
  // fence; payload: what the campaign said of itself). nullopt for other kinds, and until the
  // record is known.
  std::optional<ElectionRecord> election;
};

// How long `hold` has been held at `now_unix_ms` (never below 0: a holder whose clock runs
// ahead); -1 when its since is not known.
inline int64_t HeldMsAt(const Hold& hold, int64_t now_unix_ms) {
  if (hold.held_since_unix_ms <= 0) return -1;
  return now_unix_ms > hold.held_since_unix_ms ? now_unix_ms - hold.held_since_unix_ms : 0;
}

}  // namespace lw
