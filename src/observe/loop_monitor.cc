#include "observe/loop_monitor.h"

#include <algorithm>

namespace lw {

struct LoopMonitor::Handles {
  uv_timer_t timer;
  uv_prepare_t prepare;
  int open = 2;
};

namespace {
// 0.1 ms to 2 s, two buckets an octave: a turn's work is mostly well under a millisecond; a
// lag near the node timeout (50 ms by default) is what an operator looks for.
stats::Buckets LoopBuckets() { return stats::ExponentialBuckets(0.0001, 2, 2.0); }
}  // namespace

int LoopMonitor::Configure(uv_loop_t* loop) { return uv_loop_configure(loop, UV_METRICS_IDLE_TIME); }

void LoopMonitor::Pending::Add(const stats::Buckets& bounds, double seconds) {
  if (buckets.empty()) buckets.assign(bounds.size() + 1, 0);
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  buckets[static_cast<size_t>(at)] += 1;
  sum += seconds;
  max = std::max(max, seconds);
  any = true;
}

LoopMonitor::LoopMonitor(uv_loop_t* loop, stats::Registry& registry)
    : loop_(loop),
      handles_(new Handles),
      bounds_(LoopBuckets()),
      lag_(registry, "lockwarden_loop_lag_seconds",
           "How late the agent's event loop ran a timer due every 100 ms: the time it spent "
           "first on other work. Rounds time out when this nears the node timeout.",
           bounds_),
      turn_(registry, "lockwarden_loop_turn_seconds",
            "How long each turn of the agent's event loop worked (not counting its waits for "
            "I/O): one turn's work delays everything else on the loop.",
            bounds_) {
  uv_timer_init(loop_, &handles_->timer);
  uv_prepare_init(loop_, &handles_->prepare);
  handles_->timer.data = this;
  handles_->prepare.data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(&handles_->timer));
  uv_unref(reinterpret_cast<uv_handle_t*>(&handles_->prepare));
}

LoopMonitor::~LoopMonitor() {
  uv_timer_stop(&handles_->timer);
  uv_prepare_stop(&handles_->prepare);
  auto closed = [](uv_handle_t* h) {
    auto* handles = reinterpret_cast<Handles*>(h->data);
    if (--handles->open == 0) delete handles;
  };
  // From here the handles' data is the Handles block, which outlives this monitor.
  handles_->timer.data = handles_;
  handles_->prepare.data = handles_;
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_->timer), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_->prepare), closed);
}

void LoopMonitor::Start() {
  ArmLagTimer();
  uv_prepare_start(&handles_->prepare, [](uv_prepare_t* p) {
    static_cast<LoopMonitor*>(p->data)->OnTurn();
  });
}

void LoopMonitor::ArmLagTimer() {
  uv_update_time(loop_);
  lag_due_ms_ = uv_now(loop_) + kLagTimerMs;
  uv_timer_start(&handles_->timer, [](uv_timer_t* t) {
    static_cast<LoopMonitor*>(t->data)->OnLagTimer();
  }, kLagTimerMs, 0);
}

void LoopMonitor::OnLagTimer() {
  const uint64_t now_ms = uv_hrtime() / 1'000'000;
  const double late_s = now_ms > lag_due_ms_ ? static_cast<double>(now_ms - lag_due_ms_) / 1e3 : 0;
  lag_pending_.Add(bounds_, late_s);
  ArmLagTimer();
}

void LoopMonitor::OnTurn() {
  const uint64_t now_ns = uv_hrtime();
  const uint64_t idle_ns = uv_metrics_idle_time(loop_);
  if (last_turn_ns_ != 0) {
    const uint64_t between = now_ns - last_turn_ns_;
    const uint64_t slept = idle_ns - last_idle_ns_;
    const uint64_t worked = between > slept ? between - slept : 0;
    turn_pending_.Add(bounds_, static_cast<double>(worked) / 1e9);
  }
  last_turn_ns_ = now_ns;
  last_idle_ns_ = idle_ns;
}

LoopMonitor::Maxima LoopMonitor::Flush(Clock::time_point now) {
  Slot slot{now, lag_pending_.max * 1e3, turn_pending_.max * 1e3};
  for (auto [pending, histogram] : {std::pair{&lag_pending_, &lag_}, std::pair{&turn_pending_, &turn_}}) {
    if (pending->any) histogram->ObserveBuckets(pending->buckets, pending->sum);
    *pending = Pending{};
  }
  recent_.push_back(slot);
  while (!recent_.empty() && now - recent_.front().at > kMaximaWindow) recent_.pop_front();
  Maxima m;
  for (const Slot& s : recent_) {
    m.lag_ms = std::max(m.lag_ms, s.lag_ms);
    m.turn_ms = std::max(m.turn_ms, s.turn_ms);
  }
  return m;
}

}  // namespace lw
