#pragma once
// The request load of lw_bench --mode upgrade (upgrade.h): on a holding session, a closed loop
// acquire -> release -> ping with a pause before every request, each request's send and reply
// times recorded, and the split of those records into before / across / after an event.

#include <uv.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent_link.h"
#include "hold_session.h"
#include "measure.h"

namespace lw::bench {

enum class LoadOp : uint8_t { kAcquire, kRelease, kPing };
const char* LoadOpName(LoadOp op);

// Every answered load request, and the load's failures. Times are seconds since t0.
class LoadRecord {
 public:
  struct Request {
    double sent;
    double answered;
    LoadOp op;
  };
  explicit LoadRecord(Clock::time_point t0) : t0_(t0) {}
  double Since(Clock::time_point t) const {
    return std::chrono::duration<double>(t - t0_).count();
  }
  void Add(Clock::time_point sent, Clock::time_point answered, LoadOp op) {
    requests_.push_back({Since(sent), Since(answered), op});
  }
  void Failed(LoadOp op, std::string_view code) {
    ++failures_;
    ++failed_by_[std::string(LoadOpName(op)) + "_" +
                 (code.empty() ? std::string("unknown") : std::string(code))];
  }
  int64_t failures() const { return failures_; }

  // Splits the requests around an event that began at `begin` and ended at `end` (seconds
  // since t0; see upgrade.h for the phases) and reports, under "before_", "across_" and
  // "after_": count and µs percentiles; then longest_ms (any request, its op as longest_op and
  // its send time relative to begin as longest_sent_ms), and reply_gap_max_ms: the longest
  // time between two consecutive replies over the whole load (reply_gap_at_ms: when it began,
  // relative to begin). Failures by code follow as load_failed_<op>_<code>.
  void Report(Result& r, double begin, double end, double grace) const;

 private:
  Clock::time_point t0_;
  std::vector<Request> requests_;
  int64_t failures_ = 0;
  std::map<std::string, int64_t> failed_by_;
};

struct LoadShapeU {
  std::string prefix = "upgrade-load/";
  int64_t ttl_ms = 10'000;
  int64_t wait_ms = 10'000;
  int64_t think_ms = 1000;
};

// One session's load. Its ids are kFirstId and up, one request in flight at a time. Once
// Stop() is called it finishes the cycle it is in (a granted lock is still released) and is
// then done; it is also done when its session broke.
class LoadCycler {
 public:
  static constexpr int64_t kFirstId = 1'000'000'000;

  LoadCycler(uv_loop_t* loop, HoldingSession& session, const LoadShapeU& shape,
             LoadRecord& record);
  LoadCycler(const LoadCycler&) = delete;
  LoadCycler& operator=(const LoadCycler&) = delete;

  // Sends the first request after delay_ms.
  void Start(uint64_t delay_ms);
  void Stop();
  bool done() const { return done_ || session_.broken(); }
  // A line of the session with a load id: handled (true), or not one of ours (false).
  bool OnLine(const AgentLine& a, std::string_view line);
  // Closes the pause timer (then run the loop before destroying this).
  void Close();

 private:
  static void Fire(uv_timer_t* t);  // the pause is over: sends op_
  void After(LoadOp next);  // pauses think_ms, then sends `next` (or finishes when stopping)
  void Send(LoadOp op);

  HoldingSession& session_;
  const LoadShapeU& shape_;
  LoadRecord& record_;
  std::string resource_;
  std::string token_;
  uv_timer_t timer_{};
  LoadOp op_ = LoadOp::kAcquire;   // the request in flight, or the next one
  Clock::time_point sent_;
  int64_t id_ = kFirstId;
  bool in_flight_ = false;
  bool stopping_ = false;
  bool done_ = false;
  char out_[512];
};

}  // namespace lw::bench
