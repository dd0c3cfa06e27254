#pragma once
// Claims: what each round of a hold sends, by lock kind. Pure: the engine says which hold
// (resource, kind, part, value) and gets the RoundRequest; the keys and scripts live here and
// in core/lock_kind.h and redis/kind_scripts.h.
//
// An exclusive hold is taken with a script that also respects readers (kClaimExclusive) and
// otherwise keeps the plain commands (compare-and-delete, compare-and-pexpire, the fence's
// phase 2). A semaphore permit is a Redlock mutex on its own key, taken with a script that
// also checks and refreshes the semaphore's marker; a shared hold is a member of the readers
// ZSET. docs/safety.md has the argument for each.

#include <cstdint>
#include <string>

#include "core/lock_kind.h"
#include "locking/fencing.h"
#include "locking/rounds.h"

namespace lw {

// One hold's place: which resource, of which shape, and which part of it.
struct HoldPlace {
  const std::string& key_prefix;
  const std::string& fence_prefix;
  const std::string& name;
  LockShape shape;
  HoldMode mode = HoldMode::kExclusive;
  int permit = -1;  // kPermit only
  // An election's leader: its stored record (core/election_record.h), "" when not known yet.
  std::string_view record = {};
};

// The mode a hold of `shape` has (shared: a read hold).
HoldMode ModeOf(const LockShape& shape, bool shared);

// The key the hold occupies on the masters (the readers ZSET for a shared hold), and its
// resource's base key (a mutex's key, a semaphore's marker; release announcements use it).
std::string HoldKey(const HoldPlace& p);
std::string BaseKey(const HoldPlace& p);
// The fence counter of a fenced hold (exclusive or permit).
FencedKeys FencedKeysOf(const HoldPlace& p);

// The acquire round of a fresh hold with `token`. fence_needed > 0: phase 1 of a fenced
// acquire with that fence quorum. An exclusive acquire refused because readers hold the
// resource leaves `mark` (the same for every attempt of one waiter) as its writer-waiting
// mark for waiting_ttl_ms (each attempt refreshes it). may_hold_mark: an earlier attempt of
// this waiter ran, so a master may hold its mark, which a successful attempt removes; false
// (the first attempt) spares the masters that check.
RoundRequest AcquireRound(const HoldPlace& p, const std::string& token, int64_t ttl_ms,
                          int fence_needed, int64_t waiting_ttl_ms, const std::string& mark,
                          bool may_hold_mark = true);
RoundRequest ExtendRound(const HoldPlace& p, const std::string& token, int64_t ttl_ms);
// Waits for every master (as DeleteRound). drop_mark: an exclusive acquire giving up also
// removes its writer-waiting mark (if it is still `drop_mark`); "": an attempt undone before a
// retry keeps it.
RoundRequest ReleaseRound(const HoldPlace& p, const std::string& token,
                          const std::string& drop_mark = "");
// An election's fenced grant, phase 2: the fence and the leader's record p.record written
// where the hold is still there, and the change announced (kFenceRecord).
RoundRequest FenceRecordRound(const HoldPlace& p, const std::string& token, int64_t fence,
                              int needed);
// An election's leader as each master has it (kReadRecord; waits for every master).
RoundRequest ReadRecordRound(const std::string& key_prefix, const std::string& name);

}  // namespace lw
