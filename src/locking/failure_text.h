#pragma once
// The failures the engine answers with, each a code a client can branch on and a message a
// person can act on. Pure functions: no clock, no loop, no engine state.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/redlock_math.h"
#include "core/result.h"

namespace lw {

// What an acquire request asked for and what its attempts came to: the facts its failure
// message is built from.
struct AttemptHistory {
  int64_t ttl_ms = 0;
  int64_t wait_ms = 0;
  bool fence = false;
  int attempts = 0;                     // Redlock rounds started (0: it never contended)
  std::optional<VoteTally> last_tally;  // of the last round of the last attempt
  bool last_too_slow = false;           // the last attempt won its votes with no validity left
  bool last_in_fence_phase = false;     // the last attempt failed writing its fence
  std::string last_refusal;  // kinds: why masters refused the last attempt ("a writer holds it")
};

// A resource name as it appears in messages (core/quote.h: JSON-quoted, valid UTF-8).
std::string Quoted(std::string_view name);

// Why an acquire of `resource` ended without a grant once its wait_ms ran out (or its last
// attempt could not be retried): timeout when it was held by another owner the whole time,
// no_quorum when too few masters could vote (down, slow, in restart quarantine), saying which.
// masters: how many masters the engine has.
Failure AcquireFailure(std::string_view resource, const AttemptHistory& history, int masters);

// timeout: the request waited all of wait_ms behind a holder in this agent.
Failure QueuedTooLong(std::string_view resource, int64_t wait_ms);

// too_many: `queued` acquires of the resource are already waiting (max_waiters_per_resource).
Failure TooManyQueued(size_t queued);

// shutting_down. retry_hint: add "; retry shortly" (the request never started).
Failure ShuttingDown(bool retry_hint);

// not_held: a release by a connection that does not hold the lock with that token.
Failure ReleaseNotHeld(std::string_view resource);
// not_held: an extend by a connection that does not hold the lock with that token.
Failure ExtendNotHeld(std::string_view resource);
// not_held: the lock was released while its extension was in flight.
Failure ReleasedWhileExtending(std::string_view resource);

// An extension that did not count. lost: the lock can no longer be kept (its validity ran out
// or a quorum of counting masters said the key is not ours): not_held; otherwise no_quorum
// with `valid_left_ms` of the current validity still ahead.
Failure ExtendFailure(std::string_view resource, const VoteTally& tally, int masters, bool lost,
                      int64_t valid_left_ms);

// kind_mismatch: the resource is held as another kind than `asked` on some master (`found`:
// the value at its base key there) or through this agent (`found`: that kind's description).
Failure KindMismatch(std::string_view resource, std::string_view asked, std::string_view found);

// would_deadlock: the asking session's own hold of `resource` (its mode, how long held, the
// first characters of its token: the session's own) is what this acquire would wait for.
Failure WouldDeadlock(std::string_view resource, std::string_view mode, int64_t held_ms,
                      std::string_view token);

// no_quorum: the lock was won, but no validity was left when the grant was to be answered.
Failure ValidityRanOutBeforeReply();

}  // namespace lw
