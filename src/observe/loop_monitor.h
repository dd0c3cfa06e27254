#pragma once
// How late the agent's event loop runs, measured on the loop itself: the first thing to look at
// when rounds time out, since a loop busy past the node timeout lets rounds expire whose
// masters answered in time.
//   lag   how late a timer due every 100 ms fires (when it runs against when it was due): what
//         the loop did first, in one or more turns, delayed everything due then.
//   turn  how long each turn of the loop worked: the time between two turns less the time it
//         slept in poll (libuv's UV_METRICS_IDLE_TIME, set by Configure before the loop runs).
// Loop thread only. Each turn adds to local bucket counts; Flush (the agent's snapshot tick)
// moves them into the histograms, so a turn takes no lock.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "stats/stats.h"

namespace lw {

class LoopMonitor {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int64_t kLagTimerMs = 100;
  static constexpr std::chrono::seconds kMaximaWindow{10};

  // The loop must measure its idle time: call before it first runs. Returns libuv's error (0:
  // done; UV_ENOSYS where the platform has no such metric, and then turns count poll time too).
  static int Configure(uv_loop_t* loop);

  LoopMonitor(uv_loop_t* loop, stats::Registry& registry);
  ~LoopMonitor();
  LoopMonitor(const LoopMonitor&) = delete;
  LoopMonitor& operator=(const LoopMonitor&) = delete;

  // Neither handle keeps the loop alive.
  void Start();

  // The largest lag and turn in the last kMaximaWindow, in ms (as /api/v1/state shows them).
  struct Maxima {
    double lag_ms = 0;
    double turn_ms = 0;
  };
  // Publishes what was counted since the last Flush, and returns the window's maxima.
  Maxima Flush(Clock::time_point now);

 private:
  // Counts for one histogram between flushes.
  struct Pending {
    std::vector<double> buckets;  // one per bound, plus +Inf
    double sum = 0;
    double max = 0;
    bool any = false;
    void Add(const stats::Buckets& bounds, double seconds);
  };
  struct Handles;  // the timer and the prepare handle, freed when libuv closed both

  void OnLagTimer();
  void OnTurn();
  void ArmLagTimer();

  uv_loop_t* loop_;
  Handles* handles_;
  stats::Buckets bounds_;
  stats::Histogram lag_;
  stats::Histogram turn_;
  Pending lag_pending_, turn_pending_;
  uint64_t lag_due_ms_ = 0;          // uv_now() at which the lag timer is due
  uint64_t last_turn_ns_ = 0;        // uv_hrtime() at the last turn's prepare (0: none yet)
  uint64_t last_idle_ns_ = 0;        // uv_metrics_idle_time() then
  struct Slot {
    Clock::time_point at;
    double lag_ms, turn_ms;
  };
  std::deque<Slot> recent_;  // one per Flush within kMaximaWindow
};

}  // namespace lw
