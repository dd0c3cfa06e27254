#pragma once
// Lua scripts run atomically on each master. Both compare the stored token first, so a
// client can only delete or extend a key it still holds.

namespace lw::scripts {

inline constexpr const char* kDeleteIfHeld =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

inline constexpr const char* kExtendIfHeld =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

}  // namespace lw::scripts
