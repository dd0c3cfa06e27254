#pragma once
// Lua scripts of exclusive holds that respect readers, shared (read) holds and semaphore
// permits (core/lock_kind.h has the key layout; docs/safety.md the argument). Every script runs
// atomically on one master. ARGV[1] is always the hold's value ("<agent id>:<token>"); the
// scripts compare it before they delete or extend.
//
// Acquire scripts answer: an integer >= 0 when the hold was taken (the fence counter read when
// a fence key was given, else 0), or {"granted", that integer, the longest another agent's
// oldest waiter has waited here (ms; -1: nobody)} when the exclusive claim was asked for it; nil
// when an exclusive holder (or another agent's reservation) has the key, or an array naming
// why not:
//   {"kind", found}    the resource is in use as another kind (found: the semaphore marker or
//                      holder's value at P R, or "readers")
//   {"taken", i, ...}  permit: that permit is held; the integers are permits free here
//   {"writer"}         shared: an exclusive holder has it
//   {"readers"}        exclusive: readers hold it (the acquire leaves its writer-waiting mark)
//   {"writer-waiting"} shared: an exclusive acquire waits for the readers to go
// Extend and release scripts answer 1 (done) or 0 (the hold is not there).
//
// Readers' mark (docs/safety.md §7, "Marked readers"): while readers hold a resource, an agent
// that marks them keeps 'lockwarden:readers' (core/lock_kind.h kReadersMark) at P R, PX at least
// every reader's expiry, so that a plain SET NX of an exclusive hold fails on it as on a
// holder. Every script reads the mark as "readers may hold": a reader joins them, an
// exclusive claim checks the readers set, and a mark with no live reader is stale.

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace lw::scripts {

// Every kind script, in the order of NodeCommand's kind-script entries (redis/node_stats.h).
enum class KindScript : uint8_t {
  kClaimExclusive, kClaimShared, kClaimPermit, kExtendShared, kExtendPermit, kReleaseShared,
  kReleasePart, kFenceRecord, kReadRecord, kReleaseTurn, kLeaveQueue, kQueueHead, kTakeLease,
  kCount
};

// Shared prelude. fence(key): the counter at key (0 when absent or no key); an acquire reads it
// only once its hold is taken, so every value read is at least every fence written by an
// earlier holder on this master (it wrote while holding, before its hold went away).
// now_ms(): the master's clock. is_marker(v): v is a semaphore's marker.
#define LW_KIND_PRELUDE                                                                      \
  "local function fence(key) if not key then return 0 end local v = redis.call('get', key) " \
  "if not v then return 0 end local n = tonumber(v) "                                        \
  "if not n or n < 0 or n ~= math.floor(n) then "                                            \
  "return redis.error_reply('fence counter ' .. key .. ' is not a whole number') end "       \
  "return n end "                                                                            \
  "local function now_ms() local t = redis.call('time') "                                    \
  "return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end "                    \
  "local function is_marker(v) return string.sub(v, 1, 21) == 'lockwarden:semaphore:' end "

// Turns (docs/safety.md, "Fair turns"; core/lock_kind.h has the queue's keys), as statements
// spliced in where they run (no function is defined on a claim's or release's usual path: each
// definition costs the master on every call). LW_HEAD(q, alive, self): locals who, at, now: the
// agent other than self whose oldest waiter came first, when it came, and the master's clock
// (who nil when nobody else waits; now read only when the queue exists); entries whose expiry
// passed are dropped on the way (with the commands docs/security.md's ACL allows: no
// ZRANGEBYSCORE). LW_WAIT_HERE(q, alive, agent, waited, ttl): agent's entry says its oldest
// waiter came `waited` ms ago and lives `ttl` ms more; so do the two keys (an entry whose agent
// has a longer ttl outlives them only until that agent's next attempt writes it again).
#define LW_QUEUE(base) base " .. '\\31queue'"
#define LW_ALIVE(base) base " .. '\\31queue-alive'"
#define LW_TURN_NOW "local t = redis.call('time') now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
#define LW_HEAD(q, alive, self)                                                               \
  "local who, at, now = nil, nil, 0 if redis.call('exists', " q ") == 1 then " LW_TURN_NOW    \
  "local all = redis.call('zrange', " q ", 0, -1, 'WITHSCORES') "                            \
  "for i = 1, #all, 2 do local e = redis.call('zscore', " alive ", all[i]) "                  \
  "if not e or tonumber(e) <= now then "                                                      \
  "redis.call('zrem', " q ", all[i]) redis.call('zrem', " alive ", all[i]) "                  \
  "elseif all[i] ~= " self " then who = all[i] at = tonumber(all[i + 1]) break end end end "
#define LW_WAIT_HERE(q, alive, agent, waited, ttl)                                            \
  "do local now = 0 " LW_TURN_NOW                                                             \
  "redis.call('zadd', " q ", now - tonumber(" waited "), " agent ") "                         \
  "redis.call('zadd', " alive ", now + tonumber(" ttl "), " agent ") "                        \
  "redis.call('pexpire', " q ", " ttl ") redis.call('pexpire', " alive ", " ttl ") end "

// An exclusive hold (a mutex; the write hold of a read-write lock; an election's leader). KEYS:
// P R, readers, writer-waiting, [fence counter]. ARGV: value, ttl, writer-waiting ttl (also the
// queue entry's), the waiter's mark (the same for all its attempts: the writer-waiting value),
// "1" when an earlier attempt of this waiter may have left that mark here (else "0": the taken
// hold has no mark to remove), this agent (its value prefix), how long its oldest waiter has
// waited (ms; "-1": take no turn, as with local_first), "1" to answer how long other agents
// wait. The queue's keys are P R's with their part names appended (core/lock_kind.h): turns
// add no key or argument a claim must carry on every call. A refused claim that takes turns leaves or refreshes
// this agent's queue entry; a reservation for this agent is taken like a free key, and one for
// another refuses like a holder, and so does the readers' mark while the readers set (checked
// first) has a live reader; a mark without one is stale and taken like a free key. The readers
// set and the queue are read only when they exist. Where readers are marked, an agent sends a
// plain SET NX PX first and this script only where that was refused (RoundRequest::native).
inline constexpr const char* kClaimExclusive = LW_KIND_PRELUDE
    "if redis.call('exists', KEYS[2]) == 1 then "
    "redis.call('zremrangebyscore', KEYS[2], '-inf', now_ms()) "
    "if redis.call('zcard', KEYS[2]) > 0 then local w = redis.call('get', KEYS[3]) "
    "if not w or w == ARGV[4] then redis.call('set', KEYS[3], ARGV[4], 'PX', ARGV[3]) end "
    "if ARGV[7] ~= '-1' then " LW_WAIT_HERE(LW_QUEUE("KEYS[1]"), LW_ALIVE("KEYS[1]"), "ARGV[6]", "ARGV[7]", "ARGV[3]")
    "end return {'readers'} end end "
    "if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "local m = redis.call('get', KEYS[1]) if m and is_marker(m) then return {'kind', m} end "
    "if m ~= 'lockwarden:reserved:' .. ARGV[6] and m ~= 'lockwarden:readers' then "
    "if ARGV[7] ~= '-1' then " LW_WAIT_HERE(LW_QUEUE("KEYS[1]"), LW_ALIVE("KEYS[1]"), "ARGV[6]", "ARGV[7]", "ARGV[3]")
    "end return false end "
    "redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) end "
    "if ARGV[5] ~= '0' and redis.call('get', KEYS[3]) == ARGV[4] then "
    "redis.call('del', KEYS[3]) end "
    "local f = fence(KEYS[4]) if ARGV[8] ~= '1' then return f end "
    LW_HEAD(LW_QUEUE("KEYS[1]"), LW_ALIVE("KEYS[1]"), "ARGV[6]")
    "if not who then return {'granted', f, -1} end return {'granted', f, now - at}";

// A shared (read) hold. KEYS: P R, readers, writer-waiting (the queue's keys are P R's). ARGV: value,
// ttl, this agent, how long its oldest waiter has waited ("-1": take no turn), the queue
// entry's ttl, "1" to mark the readers at P R. Refused, it queues this agent as
// kClaimExclusive does; a reservation for this agent is taken (deleted, the hold goes into the
// readers set), even past a waiting writer's mark: the reservation says this agent's waiter
// came first. The readers' mark is no holder: a reader joins it.
inline constexpr const char* kClaimShared = LW_KIND_PRELUDE
    "local m = redis.call('get', KEYS[1]) "
    "if m and is_marker(m) then return {'kind', m} end "
    "if m == 'lockwarden:readers' then m = false end "
    "local why = nil "
    "if m and m ~= 'lockwarden:reserved:' .. ARGV[3] then why = 'writer' "
    "elseif m then redis.call('del', KEYS[1]) "
    "elseif redis.call('exists', KEYS[3]) == 1 then why = 'writer-waiting' end "
    "if why then if ARGV[4] ~= '-1' then "
    LW_WAIT_HERE(LW_QUEUE("KEYS[1]"), LW_ALIVE("KEYS[1]"), "ARGV[3]", "ARGV[4]", "ARGV[5]")
    "end return {why} end "
    "local now = now_ms() local ttl = tonumber(ARGV[2]) "
    "redis.call('zremrangebyscore', KEYS[2], '-inf', now) "
    "redis.call('zadd', KEYS[2], now + ttl, ARGV[1]) "
    "if redis.call('pttl', KEYS[2]) < ttl then redis.call('pexpire', KEYS[2], ttl) end "
    "if ARGV[6] == '1' and redis.call('pttl', KEYS[1]) < ttl then "
    "redis.call('set', KEYS[1], 'lockwarden:readers', 'PX', ttl) end "
    "return 0";

// A semaphore's permit. KEYS: P R (the marker; the queue's keys are its), the permit, readers,
// [fence counter]. ARGV: value, ttl, marker, K, this permit, the permit keys' common prefix
// (P R US "permit:"), this agent, how long its oldest waiter has waited ("-1": take no turn),
// the queue entry's ttl, "1" to answer how long other agents wait (as kClaimExclusive). A
// permit reserved for this agent is taken like a free one, and listed as free when another
// was asked for; one reserved for another agent is taken. Refused with no permit free here,
// it queues this agent (with one free, it is retried at once instead).
inline constexpr const char* kClaimPermit = LW_KIND_PRELUDE
    "local m = redis.call('get', KEYS[1]) "
    "if m and m ~= ARGV[3] then return {'kind', m} end "
    "if redis.call('exists', KEYS[3]) == 1 then return {'kind', 'readers'} end "
    "local mine = 'lockwarden:reserved:' .. ARGV[7] "
    "if not redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "if redis.call('get', KEYS[2]) ~= mine then "
    "local k = tonumber(ARGV[4]) local s = tonumber(ARGV[5]) local free = {'taken'} "
    "for i = 1, k - 1 do local j = (s + i) % k local v = redis.call('get', ARGV[6] .. j) "
    "if not v or v == mine then free[#free + 1] = j "
    "if #free > 8 then break end end end "
    "if #free == 1 and ARGV[8] ~= '-1' then "
    LW_WAIT_HERE(LW_QUEUE("KEYS[1]"), LW_ALIVE("KEYS[1]"), "ARGV[7]", "ARGV[8]", "ARGV[9]") "end "
    "return free end "
    "redis.call('set', KEYS[2], ARGV[1], 'PX', ARGV[2]) end "
    "local ttl = tonumber(ARGV[2]) "
    "if not m then redis.call('set', KEYS[1], ARGV[3], 'PX', ttl) "
    "elseif redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end "
    "local f = fence(KEYS[4]) if ARGV[10] ~= '1' then return f end "
    LW_HEAD(LW_QUEUE("KEYS[1]"), LW_ALIVE("KEYS[1]"), "ARGV[7]")
    "if not who then return {'granted', f, -1} end return {'granted', f, now - at}";

// KEYS: readers, [P R: mark the readers there]. ARGV: value, ttl. A reader whose expiry passed
// is not there. Marking, the mark is made (where P R is free) or kept at least as long.
inline constexpr const char* kExtendShared = LW_KIND_PRELUDE
    "local now = now_ms() local s = redis.call('zscore', KEYS[1], ARGV[1]) "
    "if not s or tonumber(s) <= now then return 0 end local ttl = tonumber(ARGV[2]) "
    "redis.call('zadd', KEYS[1], 'XX', now + ttl, ARGV[1]) "
    "if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end "
    "if KEYS[2] and redis.call('pttl', KEYS[2]) < ttl then local m = redis.call('get', KEYS[2]) "
    "if not m or m == 'lockwarden:readers' then "
    "redis.call('set', KEYS[2], 'lockwarden:readers', 'PX', ttl) end end "
    "return 1";

// KEYS: P R (the marker), the permit. ARGV: value, ttl. The marker lives at least as long.
inline constexpr const char* kExtendPermit =
    "if redis.call('get', KEYS[2]) ~= ARGV[1] then return 0 end "
    "local ttl = tonumber(ARGV[2]) redis.call('pexpire', KEYS[2], ttl) "
    "if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end "
    "return 1";

// KEYS: readers, [P R]. ARGV: value, release channel ("": announce nothing). The last live
// reader to go takes the readers' mark at P R with it.
inline constexpr const char* kReleaseShared =
    "if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then return 0 end "
    "if KEYS[2] and redis.call('get', KEYS[2]) == 'lockwarden:readers' then "
    "local t = redis.call('time') "
    "redis.call('zremrangebyscore', KEYS[1], '-inf', tonumber(t[1]) * 1000 + "
    "math.floor(tonumber(t[2]) / 1000)) "
    "if redis.call('zcard', KEYS[1]) == 0 then redis.call('del', KEYS[2]) end end "
    "if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], KEYS[1]) end return 1";

// A permit's key, or an exclusive hold's that also drops its waiter's writer-waiting mark (an
// exclusive acquire giving up). KEYS: the key, writer-waiting (or the key again). ARGV: value,
// release channel ("": announce nothing), the waiter's mark ("": none).
inline constexpr const char* kReleasePart =
    "if ARGV[3] ~= '' and redis.call('get', KEYS[2]) == ARGV[3] then "
    "redis.call('del', KEYS[2]) end "
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end "
    "redis.call('del', KEYS[1]) "
    "if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], KEYS[1]) end return 1";

// An election's fenced grant, phase 2 (redis/scripts.h kRaiseFenceIfHeld, plus the leader's
// record). KEYS: P R, the fence counter, the record (P R US "leader"). ARGV: value, fence,
// the stored record (core/election_record.h), the channel announcing a change ("": none).
// 1 = written; 0 = P R no longer holds value; -1 = the counter is already >= fence. The record
// gets P R's PTTL, so it never outlives the hold; extends keep the two together
// (kExtendPermit with KEYS: record, P R) and a release drops both (kReleasePart with KEYS:
// P R, record, and the record as the mark).
inline constexpr const char* kFenceRecord =
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local v = redis.call('get', KEYS[2]) local n = 0 "
    "if v then n = tonumber(v) if not n then "
    "return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not a number') end end "
    "if n >= tonumber(ARGV[2]) then return -1 end "
    "redis.call('set', KEYS[2], ARGV[2]) "
    "local ttl = redis.call('pttl', KEYS[1]) "
    "if ttl > 0 then redis.call('set', KEYS[3], ARGV[3], 'PX', ttl) end "
    "if ARGV[4] ~= '' then redis.pcall('publish', ARGV[4], KEYS[1]) end return 1";

// An election's leader as this master has it. KEYS: P R, the record. ARGV: ignored. The record
// without its value prefix when P R holds the value it starts with; otherwise nil.
inline constexpr const char* kReadRecord =
    "local r = redis.call('get', KEYS[2]) if not r then return false end "
    "local v = redis.call('get', KEYS[1]) if not v then return false end "
    "if string.sub(r, 1, #v + 1) ~= v .. '\\31' then return false end "
    "return string.sub(r, #v + 2)";

// An exclusive hold or a permit released in turn (docs/safety.md, "Fair turns"). KEYS: the
// hold's key (P R, or the permit's), [P R when it is another key (a permit's marker; the queue's
// keys are P R's)], [the election's record]. ARGV: value, release channel ("": announce
// nothing), how long this agent's next waiter has waited (ms; "-1": none), how long a
// reservation lasts (ms), this agent, [the record to drop: the third key is deleted while it
// holds exactly that]. As
// kReleasePart, except where another agent waits: P R is then left reserved for the agent
// whose oldest waiter came first, this one's next waiter included (announced when it is
// another's, whose entry then lives no longer than the reservation unless its claim comes).
// A reserved permit stays within its marker's life: the marker is extended to cover it.
inline constexpr const char* kReleaseTurn =
    "local base = KEYS[2] or KEYS[1] "
    "if KEYS[3] and redis.call('get', KEYS[3]) == ARGV[6] then redis.call('del', KEYS[3]) end "
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end "
    LW_HEAD("base .. '\\31queue'", "base .. '\\31queue-alive'", "ARGV[5]")
    "if who then local mine = tonumber(ARGV[3]) local hold = tonumber(ARGV[4]) "
    "if base ~= KEYS[1] and redis.call('pttl', base) < hold then "
    "redis.call('pexpire', base, hold) end "
    "if mine < 0 or at <= now - mine then "
    "redis.call('set', KEYS[1], 'lockwarden:reserved:' .. who, 'PX', hold) "
    "local alive = base .. '\\31queue-alive' local e = redis.call('zscore', alive, who) "
    "if e and tonumber(e) > now + hold then redis.call('zadd', alive, now + hold, who) end "
    "if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], KEYS[1]) end return 1 end "
    "redis.call('set', KEYS[1], 'lockwarden:reserved:' .. ARGV[5], 'PX', hold) return 1 end "
    "redis.call('del', KEYS[1]) "
    "if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], KEYS[1]) end return 1";

// This agent waits no more. KEYS: queue, queue-alive. ARGV: value (unused), this agent.
inline constexpr const char* kLeaveQueue =
    "redis.call('zrem', KEYS[1], ARGV[2]) redis.call('zrem', KEYS[2], ARGV[2]) return 1";

// How long the oldest waiter of an agent other than this one has waited here (ms, as a string),
// or nil when nobody else waits. KEYS: queue, queue-alive. ARGV: value (unused), this agent.
inline constexpr const char* kQueueHead =
    LW_HEAD("KEYS[1]", "KEYS[2]", "ARGV[2]")
    "if not who then return false end return tostring(now - at)";

// A detached lease taken over by this agent (docs/safety.md §9): a lease is named by its token
// fleet-wide, whichever agent's id its value carries. KEYS: P R. ARGV: this agent's value for
// the token ("<agent id>:<token>"), ttl. Where P R holds a value "<an agent id>:<token>" with
// the same token, it becomes ARGV[1] for ttl ms: 1; otherwise 0 (nothing changes).
inline constexpr const char* kTakeLease =
    "local v = redis.call('get', KEYS[1]) if not v then return 0 end "
    "local t = string.match(ARGV[1], ':[^:]+$') "
    "if not t or #v <= #t or string.sub(v, -#t) ~= t then return 0 end "
    "redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1";

#undef LW_QUEUE
#undef LW_ALIVE
#undef LW_WAIT_HERE
#undef LW_HEAD
#undef LW_TURN_NOW
#undef LW_KIND_PRELUDE

inline constexpr const char* kKindScriptBodies[] = {
    kClaimExclusive, kClaimShared, kClaimPermit, kExtendShared, kExtendPermit, kReleaseShared,
    kReleasePart,    kFenceRecord, kReadRecord,  kReleaseTurn,  kLeaveQueue,   kQueueHead,
    kTakeLease};
static_assert(std::size(kKindScriptBodies) == static_cast<size_t>(KindScript::kCount));

}  // namespace lw::scripts
