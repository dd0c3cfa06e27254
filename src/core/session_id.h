#pragma once
// SessionId: one client of the agent. A connection's id counts up from 1 at accept and is never
// reused for the life of the agent process, so a stale id names nobody rather than somebody
// else. A uid's lease session (detached leases: acquire "detach": true) is kLeaseSessionBit |
// uid: no connection has it, connection ids never reach bit 63, so the two never meet, and the
// uid is read back from the id.

#include <sys/types.h>

#include <cstdint>

namespace lw {

using SessionId = uint64_t;

inline constexpr SessionId kLeaseSessionBit = SessionId{1} << 63;

// The session that holds the detached leases of `uid`.
inline SessionId LeaseSessionOf(uid_t uid) { return kLeaseSessionBit | SessionId{uid}; }
inline bool IsLeaseSession(SessionId session) { return (session & kLeaseSessionBit) != 0; }
// The uid whose detached leases `session` holds (IsLeaseSession(session) must be true).
inline uid_t UidOfLeaseSession(SessionId session) {
  return static_cast<uid_t>(session & ~kLeaseSessionBit);
}

}  // namespace lw
