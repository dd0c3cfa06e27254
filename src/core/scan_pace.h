#pragma once
// How a walk over a master's keyspace is shaped: the SCAN MATCH pattern of a key prefix and the
// pause that holds it to a keys/second budget. Shared by the leak scanner (scan/) and the fleet
// reader (fleet/), so both escape prefixes and pace the same way.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace lw {

// SCAN MATCH pattern matching exactly the keys starting with `prefix`.
std::string PrefixPattern(std::string_view prefix);

// How long to pause so that `keys_done` keys over `elapsed` stay within `keys_per_second`.
std::chrono::microseconds PaceDelay(uint64_t keys_done, std::chrono::microseconds elapsed,
                                    int64_t keys_per_second);

}  // namespace lw
