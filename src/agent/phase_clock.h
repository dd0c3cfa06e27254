#pragma once
// PhaseClock: the wall and CPU time of the phases of one piece of work on the loop thread, for
// a log line ("settle 98 ms (cpu 12), capture 143 ms (cpu 60)"). The CPU time is the calling
// thread's (CLOCK_THREAD_CPUTIME_ID): what the phase costs whatever else the host runs, where
// the wall time includes waiting for a core.

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace lw {

class PhaseClock {
 public:
  PhaseClock() : wall_(std::chrono::steady_clock::now()), cpu_(CpuNs()) {}

  // Ends the phase that began at the last Mark (or construction) and names it.
  void Mark(const std::string& name) {
    const auto wall = std::chrono::steady_clock::now();
    const int64_t cpu = CpuNs();
    if (!text_.empty()) text_ += ", ";
    text_ += name + " " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(wall - wall_)
                                .count()) +
             " ms (cpu " + std::to_string((cpu - cpu_) / 1'000'000) + ")";
    wall_ = wall;
    cpu_ = cpu;
  }
  const std::string& text() const { return text_; }

 private:
  static int64_t CpuNs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  std::chrono::steady_clock::time_point wall_;
  int64_t cpu_;
  std::string text_;
};

}  // namespace lw
