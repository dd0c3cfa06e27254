#pragma once
// What LockEngine's operator and resume calls take and answer (locking/lock_engine.h).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/session_id.h"
#include "locking/kinds/kind.h"

namespace lw {

// An operator's revoke of a lock (LockEngine::Revoke, RevokeGrant): the (first) holder's
// session and how many masters confirmed the delete.
struct Revocation {
  SessionId session;
  int deleted;    // masters that deleted the key (the others had lost it, or did not answer)
  int holds = 1;  // holds revoked
};
using RevokeDone = std::function<void(const std::optional<Revocation>&)>;

// A hold of an earlier run of this agent, as a session asks to take it over (LockEngine::Resume).
struct ResumeAsk {
  std::string resource;
  std::string token;
  int64_t ttl_ms = 0;
  bool renew = false;
  std::optional<int64_t> fence;  // as the grant answered it: carried, not checked
  AcquireKind kind;              // shape, shared and owner, as the acquire asked
  int depth = 1;                 // a reentrant hold's, as the client counts it
  int permit = -1;               // a semaphore's permit, as the grant answered it
  // The kind is a guess (a release or extend by token names none): the key is confirmed on the
  // masters before the resource is entered here in that shape, so an acquire of another kind
  // arriving meanwhile is never refused for it. One more round trip.
  bool confirm_first = false;
  // A leadership's record as the masters store it (core/election_record.h), read by Resume
  // before it enters the hold (one more round trip); nullopt: not read yet.
  std::optional<std::string> record;
};

}  // namespace lw
