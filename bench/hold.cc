#include "hold.h"

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent_link.h"

namespace lw::bench {
namespace {

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

// One session: acquires its L locks, holds, releases on demand, one request at a time when the
// pacer says so.
class HoldingSession {
 public:
  HoldingSession(uv_loop_t* loop, const std::string& socket, int index, const HoldShape& shape,
                 Tally& tally, Pacer& pacer, std::vector<int>& granted_order, int* connected)
      : index_(index), shape_(shape), tally_(tally), pacer_(pacer), granted_order_(granted_order) {
    tokens_.resize(static_cast<size_t>(shape.locks));
    sent_.resize(static_cast<size_t>(shape.locks));
    link_ = std::make_unique<AgentLink>(
        loop, socket,
        [this, connected](int status) {
          ++*connected;
          if (status != 0) {
            ++tally_.broken;
            broken_ = true;
          }
        },
        [this](std::string_view line) { OnLine(line); },
        [this] {
          ++tally_.broken;
          broken_ = true;
        });
  }

  // Switches to releasing what was granted (the pacer then sends releases).
  void StartReleasing() {
    releasing_ = true;
    next_ = 0;
  }
  // Sends this session's next acquire or release; false when it has none left.
  bool SendOne() {
    if (broken_) return false;
    if (!releasing_) {
      if (next_ >= shape_.locks) return false;
      SendAcquire();
      return true;
    }
    return SendNextRelease();
  }
  void Close() { link_->Close(); }
  bool broken() const { return broken_; }

 private:
  std::string Resource(int l) const {
    return shape_.prefix + std::to_string(index_) + "/" + std::to_string(l);
  }

  void SendAcquire() {
    const int l = next_++;
    const int n = std::snprintf(out_, sizeof out_,
                                "{\"id\":%d,\"op\":\"acquire\",\"resource\":\"%s\",\"ttl_ms\":%lld,"
                                "\"wait_ms\":%lld,\"renew\":true}\n",
                                l + 1, Resource(l).c_str(), static_cast<long long>(shape_.ttl_ms),
                                static_cast<long long>(shape_.wait_ms));
    sent_[static_cast<size_t>(l)] = Clock::now();
    link_->Send(std::string_view(out_, static_cast<size_t>(n)));
  }

  // Releases the next granted lock, skipping those never granted; false when none is left.
  bool SendNextRelease() {
    while (next_ < shape_.locks && tokens_[static_cast<size_t>(next_)].empty()) ++next_;
    if (next_ >= shape_.locks) return false;
    const int l = next_++;
    const int n = std::snprintf(
        out_, sizeof out_, "{\"id\":%d,\"op\":\"release\",\"resource\":\"%s\",\"token\":\"%s\"}\n",
        -(l + 1), Resource(l).c_str(), tokens_[static_cast<size_t>(l)].c_str());
    link_->Send(std::string_view(out_, static_cast<size_t>(n)));
    return true;
  }

  void OnLine(std::string_view line) {
    const AgentLine a = ParseAgentLine(line);
    if (a.is_event) {
      ++tally_.lost_events;
      return;
    }
    if (a.id > 0 && a.id <= shape_.locks && !releasing_) {
      const auto l = static_cast<size_t>(a.id - 1);
      ++tally_.answered;
      if (a.ok && a.token.size() == 40) {
        ++tally_.acquired;
        tally_.acquire_us.Add(Micros(Clock::now() - sent_[l]));
        tokens_[l] = std::string(a.token);
        granted_order_.push_back(index_ * shape_.locks + static_cast<int>(l));
      } else {
        ++tally_.acquire_failed;
        ++tally_.acquire_errors[a.error.empty() ? std::string("unknown") : std::string(a.error)];
      }
      pacer_.Answered();
      return;
    }
    if (a.id < 0 && -a.id <= shape_.locks && releasing_) {
      ++tally_.release_answered;
      if (a.ok) {
        ++tally_.released_ok;
      } else if (a.error == "not_held") {
        ++tally_.release_not_held;
      } else {
        ++tally_.release_other;
      }
      pacer_.Answered();
      return;
    }
    ++tally_.protocol_errors;
  }

  int index_;
  const HoldShape& shape_;
  Tally& tally_;
  Pacer& pacer_;
  std::vector<int>& granted_order_;
  std::unique_ptr<AgentLink> link_;
  std::vector<std::string> tokens_;
  std::vector<Clock::time_point> sent_;
  int next_ = 0;
  bool releasing_ = false;
  bool broken_ = false;
  char out_[1024];
};

void Pacer::Pump() {
  size_t idle = 0;  // sessions in a row with nothing to send
  while (in_flight_ < inflight_ && idle < sessions_.size()) {
    HoldingSession* s = sessions_[next_];
    next_ = (next_ + 1) % sessions_.size();
    if (s->SendOne()) {
      ++in_flight_;
      idle = 0;
    } else {
      ++idle;
    }
  }
}

// PTTL of granted keys on one master, round-robin, at a fixed rate (see hold.h).
class RenewalSampler {
 public:
  RenewalSampler(uv_loop_t* loop, const std::string& host_port, const HoldShape& shape,
                 const std::vector<int>& granted_order)
      : shape_(shape), granted_(granted_order) {
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos) throw std::invalid_argument("--masters wants HOST:PORT,...");
    ctx_ = redisAsyncConnect(host_port.substr(0, colon).c_str(),
                             std::atoi(host_port.c_str() + colon + 1));
    if (ctx_ == nullptr || ctx_->err) throw std::runtime_error("cannot connect to " + host_port);
    ctx_->data = this;
    redisLibuvAttach(ctx_, loop);
    late_key_.resize(static_cast<size_t>(shape.sessions) * static_cast<size_t>(shape.locks));
    uv_timer_init(loop, &timer_);
    timer_.data = this;
    uv_timer_start(&timer_, Tick, 0, kTickMs);
  }

  // Stops sending; replies still in flight are ignored (the release phase may have begun).
  void Stop() {
    stopped_ = true;
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    redisAsyncDisconnect(ctx_);  // after the replies pending
  }

  void Report(Result& r) const {
    r.Number("pttl_samples", static_cast<double>(samples_));
    r.Number("late_samples", static_cast<double>(late_samples_));
    r.Number("late_keys", static_cast<double>(late_keys_));
    r.Number("late_max_ms", static_cast<double>(std::max<int64_t>(0, max_late_ms_)));
    r.Number("below_third_samples", static_cast<double>(below_third_));
    r.Number("missing_samples", static_cast<double>(missing_));
    r.Number("min_pttl_ms", static_cast<double>(min_pttl_ < 0 ? 0 : min_pttl_));
  }

 private:
  static constexpr uint64_t kTickMs = 20;

  static void Tick(uv_timer_t* t) {
    auto* self = static_cast<RenewalSampler*>(t->data);
    if (self->stopped_ || self->granted_.empty()) return;
    // Whole budget of this tick, capped so a slow master does not pile up commands.
    // (never more than one pass over the granted keys per tick).
    const int64_t budget =
        std::min<int64_t>(static_cast<int64_t>(self->shape_.sample_rate * kTickMs / 1000.0),
                          static_cast<int64_t>(self->granted_.size()));
    for (int64_t i = 0; i < budget && self->in_flight_ < 4 * budget; ++i) {
      if (self->cursor_ >= self->granted_.size()) self->cursor_ = 0;
      const int idx = self->granted_[self->cursor_++];
      const int s = idx / self->shape_.locks, l = idx % self->shape_.locks;
      const std::string key = self->shape_.key_prefix + self->shape_.prefix + std::to_string(s) +
                              "/" + std::to_string(l);
      ++self->in_flight_;
      redisAsyncCommand(self->ctx_, Reply, reinterpret_cast<void*>(static_cast<intptr_t>(idx)),
                        "PTTL %b", key.data(), key.size());
    }
  }

  static void Reply(redisAsyncContext* c, void* reply, void* privdata) {
    auto* self = static_cast<RenewalSampler*>(c->data);
    auto* r = static_cast<redisReply*>(reply);
    --self->in_flight_;
    if (self->stopped_ || r == nullptr || r->type != REDIS_REPLY_INTEGER) return;
    const auto idx = static_cast<size_t>(reinterpret_cast<intptr_t>(privdata));
    const int64_t pttl = r->integer;
    ++self->samples_;
    if (pttl < 0) {
      ++self->missing_;
      return;
    }
    if (self->min_pttl_ < 0 || pttl < self->min_pttl_) self->min_pttl_ = pttl;
    const int64_t late = self->shape_.ttl_ms * 2 / 3 - pttl;
    self->max_late_ms_ = std::max(self->max_late_ms_, late);
    if (pttl < self->shape_.ttl_ms / 3) ++self->below_third_;
    if (late > 100) {
      ++self->late_samples_;
      if (!self->late_key_[idx]) {
        self->late_key_[idx] = true;
        ++self->late_keys_;
      }
    }
  }

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

}  // namespace

int RunHold(const Flags& f) {
  HoldShape shape;
  shape.sessions = static_cast<int>(f.Int("sessions", 1000));
  shape.locks = static_cast<int>(f.Int("locks", 100));
  shape.ttl_ms = f.Int("ttl-ms", 30'000);
  shape.wait_ms = f.Int("wait-ms", 0);
  shape.hold_seconds = f.Real("seconds", 30);
  shape.inflight = static_cast<int>(f.Int("inflight", 256));
  shape.prefix = f.Str("prefix", "hold/");
  shape.key_prefix = f.Str("key-prefix", "lock:");
  shape.sample_rate = f.Real("sample-keys-per-second", 50'000);
  const std::string socket = f.Str("socket", "");
  const auto masters = f.List("masters");
  if (socket.empty() || masters.empty() || !f.Has("agent-pid")) {
    throw std::invalid_argument("hold mode needs --socket, --agent-pid and --masters");
  }
  const int agent = static_cast<int>(f.Int("agent-pid", 0));

  uv_loop_t* loop = uv_default_loop();
  const int64_t rss_start = StatusKib(agent, "VmRSS");
  Tally tally;
  std::vector<int> granted_order;
  granted_order.reserve(static_cast<size_t>(shape.sessions) * static_cast<size_t>(shape.locks));
  std::vector<std::unique_ptr<HoldingSession>> sessions;
  Pacer pacer(shape.inflight);
  // Connect in batches, so the agent's listen backlog is never the limit.
  int connected = 0;
  for (int s = 0; s < shape.sessions; ++s) {
    sessions.push_back(std::make_unique<HoldingSession>(loop, socket, s, shape, tally, pacer,
                                                        granted_order, &connected));
    pacer.Add(sessions.back().get());
    if ((s + 1) % 64 == 0) RunUntil(loop, [&] { return connected == s + 1; });
  }
  RunUntil(loop, [&] { return connected == shape.sessions; });
  if (tally.broken > 0) {
    std::fprintf(stderr, "lw_bench: %lld of %d sessions could not connect\n",
                 static_cast<long long>(tally.broken), shape.sessions);
    return 2;
  }

  RenewalSampler sampler(loop, masters[0], shape, granted_order);
  const auto t0 = Clock::now();
  pacer.Pump();
  const int64_t total = static_cast<int64_t>(shape.sessions) * shape.locks;
  RunUntil(loop, [&] { return tally.answered == total || tally.broken > 0; });
  const double acquire_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::fprintf(stderr, "lw_bench hold: %lld of %lld locks acquired in %.1f s; holding %.1f s\n",
               static_cast<long long>(tally.acquired), static_cast<long long>(total),
               acquire_seconds, shape.hold_seconds);

  // Hold: sample the agent's RSS every 250 ms.
  struct RssWatch {
    int pid;
    int64_t max;
  } rss{agent, StatusKib(agent, "VmRSS")};
  const double cpu_before = CpuSeconds({agent});
  uv_timer_t rss_timer;
  uv_timer_init(loop, &rss_timer);
  rss_timer.data = &rss;
  uv_timer_start(
      &rss_timer,
      [](uv_timer_t* t) {
        auto* w = static_cast<RssWatch*>(t->data);
        w->max = std::max(w->max, StatusKib(w->pid, "VmRSS"));
      },
      250, 250);
  const auto hold_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(shape.hold_seconds));
  RunUntil(loop, [&] { return Clock::now() >= hold_until || tally.broken > 0; });
  const double hold_cpu = CpuSeconds({agent}) - cpu_before;
  const int64_t rss_end = StatusKib(agent, "VmRSS");
  const int64_t rss_max = std::max(rss.max, rss_end);
  uv_close(reinterpret_cast<uv_handle_t*>(&rss_timer), nullptr);
  sampler.Stop();

  for (auto& s : sessions) s->StartReleasing();
  pacer.Pump();
  RunUntil(loop, [&] { return tally.release_answered == tally.acquired || tally.broken > 0; });
  for (auto& s : sessions) s->Close();
  uv_run(loop, UV_RUN_DEFAULT);

  Result r;
  r.Text("bench", "agent");
  r.Text("label", f.Str("label", "hold"));
  r.Text("mode", "hold");
  r.Number("sessions", shape.sessions);
  r.Number("locks", static_cast<double>(total));
  r.Number("ttl_ms", static_cast<double>(shape.ttl_ms));
  r.Number("acquired", static_cast<double>(tally.acquired));
  r.Number("acquire_failed", static_cast<double>(tally.acquire_failed));
  for (const auto& [code, n] : tally.acquire_errors) {
    r.Number("acquire_failed_" + code, static_cast<double>(n));
  }
  r.Number("acquire_seconds", acquire_seconds, 2);
  r.Percentiles("acquire_us", tally.acquire_us);
  r.Number("hold_seconds", shape.hold_seconds, 1);
  r.Number("rss_start_kib", static_cast<double>(rss_start));
  r.Number("rss_hold_max_kib", static_cast<double>(rss_max));
  r.Number("rss_hold_end_kib", static_cast<double>(rss_end));
  r.Number("hwm_kib", static_cast<double>(StatusKib(agent, "VmHWM")));
  r.Number("agent_cpu_hold_s", hold_cpu, 2);
  sampler.Report(r);
  r.Number("lost_events", static_cast<double>(tally.lost_events));
  r.Number("released_ok", static_cast<double>(tally.released_ok));
  r.Number("release_not_held", static_cast<double>(tally.release_not_held));
  r.Number("release_failed_other", static_cast<double>(tally.release_other));
  r.Number("broken_connections", static_cast<double>(tally.broken));
  r.Number("protocol_errors", static_cast<double>(tally.protocol_errors));
  if (!r.Emit(f.Str("json", ""))) return 2;
  const bool clean = tally.acquire_failed == 0 && tally.lost_events == 0 &&
                     tally.release_not_held == 0 && tally.release_other == 0 && tally.broken == 0 &&
                     tally.protocol_errors == 0;
  return clean ? 0 : 1;
}

}  // namespace lw::bench
