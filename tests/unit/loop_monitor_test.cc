// LoopMonitor on a real libuv loop: a turn that blocks (the stall is the event under test)
// shows as a late timer and a long turn, in the maxima and in the histograms.

#include "observe/loop_monitor.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

namespace lw::loop_monitor_test {
namespace {

using Clock = std::chrono::steady_clock;

// The count of observations of histogram `name` in the registry, or -1 if absent.
double CountOf(prometheus::Registry& registry, const std::string& name) {
  for (const auto& family : registry.Collect()) {
    if (family.name == name && !family.metric.empty()) {
      return static_cast<double>(family.metric[0].histogram.sample_count);
    }
  }
  return -1;
}

class LoopMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    ASSERT_EQ(LoopMonitor::Configure(&loop_), 0);
    monitor_ = std::make_unique<LoopMonitor>(&loop_, registry_);
    monitor_->Start();
    uv_timer_init(&loop_, &stall_);
    uv_timer_init(&loop_, &keep_);
  }
  void TearDown() override {
    monitor_.reset();
    uv_close(reinterpret_cast<uv_handle_t*>(&stall_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&keep_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);  // every handle finishes closing
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  // `at_ms` in, one callback keeps the loop busy for `for_ms` (the stall is the event under
  // test); another timer keeps the loop turning every `every_ms` (the monitor's handles do not
  // hold it open).
  void StallAt(int64_t at_ms, int64_t for_ms, int64_t every_ms) {
    stall_ms_ = for_ms;
    stall_.data = &stall_ms_;
    uv_timer_start(&stall_, [](uv_timer_t* t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int64_t*>(t->data)));
    }, static_cast<uint64_t>(at_ms), 0);
    uv_timer_start(&keep_, [](uv_timer_t*) {}, static_cast<uint64_t>(every_ms),
                   static_cast<uint64_t>(every_ms));
  }

  // Turns the loop until `seen` holds of the maxima a flush returns, or 5 s; returns the time
  // of the flush that first showed it (the epoch when none did) and its maxima.
  std::pair<Clock::time_point, LoopMonitor::Maxima> TurnUntil(
      const std::function<bool(const LoopMonitor::Maxima&)>& seen) {
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    LoopMonitor::Maxima m;
    while (Clock::now() < give_up) {
      uv_run(&loop_, UV_RUN_ONCE);
      const auto now = Clock::now();
      m = monitor_->Flush(now);
      if (seen(m)) return {now, m};
    }
    return {Clock::time_point{}, m};
  }

  uv_loop_t loop_{};
  prometheus::Registry registry_;
  std::unique_ptr<LoopMonitor> monitor_;
  uv_timer_t stall_{}, keep_{};
  int64_t stall_ms_ = 0;
};

// The monitor's timer, due at 100 ms, fires at least 70 ms late behind a 150 ms stall at 20 ms,
// and that turn worked at least 150 ms.
TEST_F(LoopMonitorTest, ABlockedTurnShowsAsALateTimerAndALongTurn) {
  StallAt(20, 150, 10);
  const auto [at, seen] = TurnUntil([](const auto& m) { return m.lag_ms >= 50; });
  EXPECT_NE(at, Clock::time_point{}) << "the timer due during the stall was not seen late";
  EXPECT_GE(seen.turn_ms, 150) << "the blocked turn was not seen";
  EXPECT_LT(seen.lag_ms, 5000);
  EXPECT_GT(CountOf(registry_, "lockwarden_loop_lag_seconds"), 0);
  EXPECT_GT(CountOf(registry_, "lockwarden_loop_turn_seconds"), 0);
}

// The maxima cover the last kMaximaWindow only: a stall older than that no longer shows.
TEST_F(LoopMonitorTest, MaximaForgetWhatIsOlderThanTheirWindow) {
  StallAt(5, 30, 1);
  // The flush that first shows the stalled turn: its slot, at `seen`, holds it.
  const auto [seen, maxima] = TurnUntil([](const auto& m) { return m.turn_ms >= 30; });
  ASSERT_NE(seen, Clock::time_point{}) << "the stalled turn was never seen";
  EXPECT_GE(monitor_->Flush(seen + LoopMonitor::kMaximaWindow).turn_ms, 30) << "still inside";
  EXPECT_LT(monitor_->Flush(seen + LoopMonitor::kMaximaWindow + std::chrono::seconds(1)).turn_ms,
            30)
      << "older than the window";
}

}  // namespace
}  // namespace lw::loop_monitor_test
