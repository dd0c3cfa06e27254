#pragma once
// The wall clock in Unix milliseconds, for what people read (event times, "first seen",
// "checked at"). The one clock read core/ offers: pure logic still takes time as a parameter,
// and durations always use steady_clock.

#include <chrono>
#include <cstdint>

namespace lw {

inline int64_t UnixMsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace lw
