#pragma once
// Lua scripts run atomically on each master: every script lockwarden sends. The lock scripts
// compare the stored token first, so a client can only delete, extend or fence a key it still
// holds; the leak remedy touches a key only while it still has no TTL.

#include <optional>
#include <string>
#include <string_view>

namespace lw::scripts {

// The channel a release is announced on, so agents with waiters for that key elsewhere can try
// at once instead of waiting out their retry delay. One channel per lock key.
inline constexpr std::string_view kReleaseChannelPrefix = "lockwarden:released:";
inline std::string ReleaseChannel(const std::string& key) {
  return std::string(kReleaseChannelPrefix) + key;
}
// The lock key whose release `channel` announces; nullopt when it is not a release channel.
inline std::optional<std::string> ReleasedKey(std::string_view channel) {
  if (!channel.starts_with(kReleaseChannelPrefix)) return std::nullopt;
  return std::string(channel.substr(kReleaseChannelPrefix.size()));
}

// KEYS[1] lock key; ARGV[1] token, ARGV[2] release channel ("" = announce nothing).
// redis.pcall: a user whose ACL forbids PUBLISH still releases (the announcement is lost, and
// waiters elsewhere fall back to their retry delay).
inline constexpr const char* kDeleteIfHeld =
    "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) "
    "if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], KEYS[1]) end return 1 "
    "else return 0 end";

// An exclusive hold at P R that may be an election's leader (kind_scripts.h kFenceRecord). KEYS:
// P R, its leader record (P R US "leader"). ARGV: value, release channel ("": announce
// nothing). The record goes first when it names the value (it starts with value US); then P R
// as kDeleteIfHeld: 1 = P R held the value and was deleted.
inline constexpr const char* kDeleteWithRecord =
    "local r = redis.call('get', KEYS[2]) "
    "if r and string.sub(r, 1, #ARGV[1] + 1) == ARGV[1] .. '\\31' then "
    "redis.call('del', KEYS[2]) end "
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end "
    "redis.call('del', KEYS[1]) "
    "if ARGV[2] ~= '' then redis.pcall('publish', ARGV[2], KEYS[1]) end return 1";

// KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl in ms.
inline constexpr const char* kExtendIfHeld =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

// Fenced acquire, phase 1, is the acquire script with a fence key (kind_scripts.h).

// Fenced acquire, phase 2. KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] fence.
// 1 = written; 0 = the lock key no longer holds the token; -1 = the counter is already >= fence
// (never lowered; an equal value means another grant has that fence, so it is refused too).
// The counter has no TTL by design: it must outlive every lock of the resource.
inline constexpr const char* kRaiseFenceIfHeld =
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local v = redis.call('get', KEYS[2]) local n = 0 "
    "if v then n = tonumber(v) if not n then "
    "return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not a number') end end "
    "if n >= tonumber(ARGV[2]) then return -1 end "
    "redis.call('set', KEYS[2], ARGV[2]) return 1";

// Leak remedy (scan/remedy.h). KEYS[1] the leaked key; ARGV[1] 'delete' or 'expire', ARGV[2]
// ttl in ms (for 'expire'). 1 = done; 0 = the key is gone or has a TTL by now (untouched).
inline constexpr const char* kRemedyLeak = R"lua(
if redis.call('PTTL', KEYS[1]) ~= -1 then return 0 end
if ARGV[1] == 'delete' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
)lua";

}  // namespace lw::scripts
