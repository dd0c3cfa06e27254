#pragma once
// The pieces of lw_bench's hold test (hold.h) that the upgrade test (upgrade.h) reuses: many
// sessions each acquiring its own renewed locks, paced over all sessions, and a PTTL sampler
// that checks renewals from outside. Everything runs on the bench's single libuv loop.

#include <hiredis/async.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent_link.h"
#include "measure.h"

namespace lw::bench {

struct HoldShape {
  int sessions = 1000;
  int locks = 100;
  int64_t ttl_ms = 30'000;
  int64_t wait_ms = 0;  // of each acquire: every resource is free, so only a retry waits
  double hold_seconds = 30;
  int inflight = 256;  // acquires (then releases) in flight, all sessions together
  std::string prefix = "hold/";
  std::string key_prefix = "lock:";
  double sample_rate = 50'000;  // PTTL samples per second
};

struct Tally {
  int64_t acquired = 0, acquire_failed = 0, answered = 0;
  int64_t released_ok = 0, release_not_held = 0, release_other = 0, release_answered = 0;
  int64_t lost_events = 0, protocol_errors = 0, broken = 0;
  std::map<std::string, int64_t> broken_by;  // "connect: <libuv error>" or "closed by the agent"
  std::map<std::string, int64_t> acquire_errors;  // by error code
  Samples acquire_us;
};

class HoldingSession;

// Keeps `inflight` requests in flight over all sessions, taking the sessions in turn, so the
// agent sees many sessions at once but never a burst of 100k requests.
class Pacer {
 public:
  explicit Pacer(int inflight) : inflight_(inflight) {}
  void Add(HoldingSession* s) { sessions_.push_back(s); }
  // Sends until `inflight` are in flight or no session has anything left to send.
  void Pump();
  void Answered() {
    --in_flight_;
    Pump();
  }

 private:
  int inflight_;
  int in_flight_ = 0;
  size_t next_ = 0;
  std::vector<HoldingSession*> sessions_;
};

// One session: acquires its L locks "<prefix><index>/<l>" (request ids 1..L), holds, releases
// on demand (ids -1..-L), one request at a time when the pacer says so. Every pushed event
// counts as lost in the tally; a connection that fails or closes counts as broken.
class HoldingSession {
 public:
  // A line that is not one of this session's acquire or release replies (nor an event): true
  // when the owner recognised it, false to count a protocol error.
  using OtherLine = std::function<bool(const AgentLine& parsed, std::string_view line)>;

  // connected is incremented once the connection is made or has failed.
  HoldingSession(uv_loop_t* loop, const std::string& socket, int index, const HoldShape& shape,
                 Tally& tally, Pacer& pacer, std::vector<int>& granted_order, int* connected);

  // Switches to releasing what was granted (the pacer then sends releases).
  void StartReleasing() {
    releasing_ = true;
    next_ = 0;
  }
  // Sends this session's next acquire or release; false when it has none left.
  bool SendOne();
  // Sends a line of the owner's own (it must end with '\n'; its id outside ±1..L).
  void Send(std::string_view line) { link_->Send(line); }
  void SetOtherLine(OtherLine other) { other_ = std::move(other); }
  void Close() { link_->Close(); }
  bool broken() const { return broken_; }
  bool open() const { return link_->open(); }
  int index() const { return index_; }
  // Locks granted to this session and not released.
  int granted() const { return granted_; }

 private:
  std::string Resource(int l) const;
  void SendAcquire();
  // Releases the next granted lock, skipping those never granted; false when none is left.
  bool SendNextRelease();
  void OnLine(std::string_view line);

  int index_;
  const HoldShape& shape_;
  Tally& tally_;
  Pacer& pacer_;
  std::vector<int>& granted_order_;
  std::unique_ptr<AgentLink> link_;
  OtherLine other_;
  std::vector<std::string> tokens_;
  std::vector<Clock::time_point> sent_;
  int next_ = 0;
  int granted_ = 0;
  bool releasing_ = false;
  bool broken_ = false;
  char out_[1024];
};

// PTTL of granted keys on one master, round-robin, at shape.sample_rate keys per second (see
// hold.h for what a late sample is). granted_order (indices session * locks + lock) may grow
// while it samples.
class RenewalSampler {
 public:
  RenewalSampler(uv_loop_t* loop, const std::string& host_port, const HoldShape& shape,
                 const std::vector<int>& granted_order);

  // Stops sending; replies still in flight are ignored (the release phase may have begun).
  void Stop();
  // pttl_samples, late_samples, late_keys, late_max_ms, below_third_samples, missing_samples,
  // min_pttl_ms.
  void Report(Result& r) const;

 private:
  static constexpr uint64_t kTickMs = 20;
  static void Tick(uv_timer_t* t);
  static void Reply(redisAsyncContext* c, void* reply, void* privdata);

  const HoldShape& shape_;
  const std::vector<int>& granted_;
  redisAsyncContext* ctx_ = nullptr;
  uv_timer_t timer_{};
  size_t cursor_ = 0;
  int64_t in_flight_ = 0;
  bool stopped_ = false;
  std::vector<bool> late_key_;
  int64_t samples_ = 0, late_samples_ = 0, late_keys_ = 0, below_third_ = 0, missing_ = 0;
  int64_t max_late_ms_ = INT64_MIN, min_pttl_ = -1;
};

// Runs the loop until pred() holds.
template <class Pred>
void RunUntil(uv_loop_t* loop, Pred pred) {
  while (!pred()) uv_run(loop, UV_RUN_ONCE);
}

}  // namespace lw::bench
