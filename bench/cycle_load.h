#pragma once
// The closed-loop acquire+release workload shared by lw_bench (through the agent) and
// lw_bench_raw (straight to the masters), so both measure the same thing the same way.
//
// Modes (client i of C, each its own connection or logical client):
//   uncontended  client i always locks "<prefix>u<i>"
//   contended    every client locks "<prefix>one" and waits for it
//   mixed        each cycle, with probability hot_share a client locks one of hot_keys
//                "<prefix>hot<k>" (k uniform) and waits for it, else its own "<prefix>u<i>"
//
// Measured window: [start + warmup, start + warmup + seconds]. An acquire latency is recorded
// when its grant arrives inside the window; a cycle counts when its release is answered inside
// it. Contended acquires (contended mode, hot keys in mixed mode) also go to "wait" samples, and
// each grant of a contended key that follows a release of that key records the hand-off gap:
// from sending the previous holder's release to receiving the next grant of that key. A grant
// given a role (a semaphore's permit, a read or a write hold) also records its wait under it.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "measure.h"

namespace lw::bench {

enum class Mode { kUncontended, kContended, kMixed };
// Parses "uncontended" / "contended" / "mixed"; throws std::invalid_argument otherwise.
Mode ParseMode(const std::string& text);
const char* ModeName(Mode m);

struct LoadShape {
  Mode mode = Mode::kUncontended;
  int clients = 1;
  double seconds = 5;
  double warmup_seconds = 0.5;
  std::string prefix = "bench/";
  int hot_keys = 4;
  double hot_share = 0.10;
};
// --mode, --clients, --seconds, --warmup-seconds, --prefix, --hot-keys, --hot-share.
LoadShape ShapeFromFlags(const Flags& f);


// A resource chosen for one cycle: its name and, for a contended key, its index (else -1).
struct Pick {
  const std::string* resource;
  int hot;
};

class CycleLoad {
 public:
  explicit CycleLoad(const LoadShape& shape);

  // Starts the warmup now: opens the window after warmup_seconds and closes it `seconds`
  // later, calling the callbacks at those moments (to sample CPU). The timers are closed when
  // the window closes, so they never keep the loop alive.
  void StartWindow(uv_loop_t* loop, std::function<void()> opened, std::function<void()> closed);
  bool over() const { return over_; }

  Pick Choose(int client);

  // role (optional): the grant's wait also goes to the samples of that role (wait_<role>_us).
  void Granted(const Pick& p, Clock::time_point sent, const char* role = nullptr);
  void ReleaseSent(const Pick& p);
  void CycleDone() {
    if (in_window_) ++cycles_;
  }
  void AcquireFailed(const std::string& code);
  void ReleaseFailed(const std::string& code);
  int64_t failures() const { return failures_; }

  // cycles, cycles/s, acquire/wait/hand-off percentiles, failures by code.
  void Report(Result& r);
  int64_t cycles() const { return cycles_; }

 private:
  static void OnTimer(uv_timer_t* t);

  LoadShape shape_;
  uv_timer_t timer_{};
  std::function<void()> opened_, closed_;
  std::vector<std::string> own_;  // per client
  std::vector<std::string> hot_;  // contended keys
  std::vector<Clock::time_point> release_sent_;
  std::vector<bool> release_pending_;
  std::mt19937_64 rng_{7};
  Clock::time_point opened_at_;
  double window_seconds_ = 0;  // measured, not as asked
  bool in_window_ = false;
  bool over_ = false;
  int64_t cycles_ = 0;
  int64_t failures_ = 0;
  std::map<std::string, int64_t> failed_by_code_;
  Samples acquire_, wait_, handoff_;
  std::map<std::string, Samples> wait_by_role_;
};

}  // namespace lw::bench
