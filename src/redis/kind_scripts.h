#pragma once
// Lua scripts of exclusive holds that respect readers, shared (read) holds and semaphore
// permits (core/lock_kind.h has the key layout; docs/safety.md the argument). Every script runs
// atomically on one master. ARGV[1] is always the hold's value ("<agent id>:<token>"); the
// scripts compare it before they delete or extend.
//
// Acquire scripts answer: an integer >= 0 when the hold was taken (the fence counter read when
// a fence key was given, else 0), nil when an exclusive holder has the key, or an array naming
// why not:
//   {"kind", found}    the resource is in use as another kind (found: the semaphore marker or
//                      holder's value at P R, or "readers")
//   {"taken", i, ...}  permit: that permit is held; the integers are permits free here
//   {"writer"}         shared: an exclusive holder has it
//   {"readers"}        exclusive: readers hold it (the acquire leaves its writer-waiting mark)
//   {"writer-waiting"} shared: an exclusive acquire waits for the readers to go
// Extend and release scripts answer 1 (done) or 0 (the hold is not there).

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace lw::scripts {

// Every kind script, in the order of NodeCommand's kind-script entries (redis/node_stats.h).
enum class KindScript : uint8_t {
  kClaimExclusive, kClaimShared, kClaimPermit, kExtendShared, kExtendPermit, kReleaseShared,
  kReleasePart, kFenceRecord, kReadRecord, kCount
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

// An exclusive hold (a mutex; the write hold of a read-write lock). KEYS: P R, readers,
// writer-waiting, [fence counter]. ARGV: value, ttl, writer-waiting ttl, the waiter's mark (the
// same for all its attempts: the writer-waiting value), "1" when an earlier attempt of this
// waiter may have left that mark here (else "0": the taken hold has no mark to remove).
// The readers set is read only when it exists, so a mutex nobody reads costs one EXISTS more.
inline constexpr const char* kClaimExclusive = LW_KIND_PRELUDE
    "if redis.call('exists', KEYS[2]) == 1 then "
    "redis.call('zremrangebyscore', KEYS[2], '-inf', now_ms()) "
    "if redis.call('zcard', KEYS[2]) > 0 then local w = redis.call('get', KEYS[3]) "
    "if not w or w == ARGV[4] then redis.call('set', KEYS[3], ARGV[4], 'PX', ARGV[3]) end "
    "return {'readers'} end end "
    "if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "local m = redis.call('get', KEYS[1]) if m and is_marker(m) then return {'kind', m} end "
    "return false end "
    "if ARGV[5] ~= '0' and redis.call('get', KEYS[3]) == ARGV[4] then "
    "redis.call('del', KEYS[3]) end "
    "return fence(KEYS[4])";

// A shared (read) hold. KEYS: P R, readers, writer-waiting. ARGV: value, ttl.
inline constexpr const char* kClaimShared = LW_KIND_PRELUDE
    "local m = redis.call('get', KEYS[1]) "
    "if m then if is_marker(m) then return {'kind', m} end return {'writer'} end "
    "if redis.call('exists', KEYS[3]) == 1 then return {'writer-waiting'} end "
    "local now = now_ms() local ttl = tonumber(ARGV[2]) "
    "redis.call('zremrangebyscore', KEYS[2], '-inf', now) "
    "redis.call('zadd', KEYS[2], now + ttl, ARGV[1]) "
    "if redis.call('pttl', KEYS[2]) < ttl then redis.call('pexpire', KEYS[2], ttl) end "
    "return 0";

// A semaphore's permit. KEYS: P R (the marker), the permit, readers, [fence counter]. ARGV:
// value, ttl, marker, K, this permit, the permit keys' common prefix (P R US "permit:").
inline constexpr const char* kClaimPermit = LW_KIND_PRELUDE
    "local m = redis.call('get', KEYS[1]) "
    "if m and m ~= ARGV[3] then return {'kind', m} end "
    "if redis.call('exists', KEYS[3]) == 1 then return {'kind', 'readers'} end "
    "if not redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "local k = tonumber(ARGV[4]) local s = tonumber(ARGV[5]) local free = {'taken'} "
    "for i = 1, k - 1 do local j = (s + i) % k "
    "if redis.call('exists', ARGV[6] .. j) == 0 then free[#free + 1] = j "
    "if #free > 8 then break end end end return free end "
    "local ttl = tonumber(ARGV[2]) "
    "if not m then redis.call('set', KEYS[1], ARGV[3], 'PX', ttl) "
    "elseif redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end "
    "return fence(KEYS[4])";

// KEYS: readers. ARGV: value, ttl. A reader whose expiry passed is not there.
inline constexpr const char* kExtendShared = LW_KIND_PRELUDE
    "local now = now_ms() local s = redis.call('zscore', KEYS[1], ARGV[1]) "
    "if not s or tonumber(s) <= now then return 0 end local ttl = tonumber(ARGV[2]) "
    "redis.call('zadd', KEYS[1], 'XX', now + ttl, ARGV[1]) "
    "if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end "
    "return 1";

// KEYS: P R (the marker), the permit. ARGV: value, ttl. The marker lives at least as long.
inline constexpr const char* kExtendPermit =
    "if redis.call('get', KEYS[2]) ~= ARGV[1] then return 0 end "
    "local ttl = tonumber(ARGV[2]) redis.call('pexpire', KEYS[2], ttl) "
    "if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end "
    "return 1";

// KEYS: readers. ARGV: value, release channel ("": announce nothing).
inline constexpr const char* kReleaseShared =
    "if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then return 0 end "
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

#undef LW_KIND_PRELUDE

inline constexpr const char* kKindScriptBodies[] = {
    kClaimExclusive, kClaimShared,  kClaimPermit, kExtendShared, kExtendPermit,
    kReleaseShared,  kReleasePart, kFenceRecord, kReadRecord};
static_assert(std::size(kKindScriptBodies) == static_cast<size_t>(KindScript::kCount));

}  // namespace lw::scripts
