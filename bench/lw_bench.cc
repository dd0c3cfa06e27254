// Load generator for a running agent (see bench/README.md). One thread, one libuv loop, C
// separate Unix-socket connections, each a closed loop of acquire -> release -> next.
//
//   lw_bench --socket PATH [--agent-pid PID] [--redis-pids P1,P2,...]
//            --mode uncontended|contended|mixed|hold|upgrade [--clients C] [--seconds S]
//            [--warmup-seconds W] [--ttl-ms T] [--wait-ms W] [--own-wait-ms W] [--prefix P]
//            [--hot-keys K] [--hot-share F] [--label L] [--json FILE]
//            [--permits K | --shared-clients N]
//   hold mode: --sessions S --locks L [--ttl-ms T] [--wait-ms W] [--seconds D]
//            --masters H:P,... [--sample-keys-per-second N] [--key-prefix lock:] (see hold.h)
//   upgrade mode: the hold's flags (no --seconds) and --load-sessions N --think-ms P
//            --load-wait-ms W --load-prefix P --before-seconds B --after-seconds A
//            --grace-ms G --watch-ms W --upgrade-timeout-ms T --pid-file PATH (see upgrade.h)
//
// --wait-ms is the wait_ms of a contended acquire (a hot key); --own-wait-ms that of a client's
// own, uncontended key (default 0: one attempt, the path measured, as lw_bench_raw and
// node-redlock make it). A smoke run, which must pass on a loaded machine, gives both a wait, so
// that an attempt a slow master made fail is retried instead of failing the run.
//
// The kind of lock (issue 18): --permits K makes every acquire a permit of a semaphore of K;
// --shared-clients N makes clients 0..N-1 take read holds ("shared": true) and the others the
// write hold of the same read-write lock. Their waits are also reported per role (wait_read_us,
// wait_write_us, wait_permit_us).
//
// Prints one `key=value` line (cycles/s, acquire latency p50/p90/p99/max in µs, contended wait
// and hand-off, agent CPU seconds per 1k cycles) and appends it as JSON to --json. Exit status:
// 0 when every cycle succeeded, 1 when any failed, 2 on a setup error.

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent_link.h"
#include "cycle_load.h"
#include "hold.h"
#include "measure.h"
#include "upgrade.h"

namespace lw::bench {
namespace {

// What one client's acquires add to the request, and the role its waits are reported under
// (nullptr: none, a mutex).
struct HoldKind {
  std::string fields;
  const char* role = nullptr;
};

// Client i's kind: a permit of a semaphore of `permits` (> 0), else a read hold for the first
// `shared_clients` clients and the write hold for the rest (shared_clients > 0), else a mutex.
HoldKind KindOf(int i, int64_t permits, int64_t shared_clients) {
  if (permits > 0) return {",\"permits\":" + std::to_string(permits), "permit"};
  if (shared_clients <= 0) return {};
  if (i < shared_clients) return {",\"shared\":true", "read"};
  return {"", "write"};
}

// One client: a connection running acquire+release cycles until the window closes.
class CyclingClient {
 public:
  // kind: what this client's acquires add (HoldKind); its role names its wait samples.
  CyclingClient(uv_loop_t* loop, const std::string& socket, int index, CycleLoad& load,
                int64_t ttl_ms, int64_t wait_ms, int64_t own_wait_ms, HoldKind kind,
                int* connected, int* broken)
      : index_(index),
        load_(load),
        ttl_ms_(ttl_ms),
        wait_ms_(wait_ms),
        own_wait_ms_(own_wait_ms),
        kind_(std::move(kind)) {
    link_ = std::make_unique<AgentLink>(
        loop, socket,
        [this, connected, broken](int status) { ++*(status == 0 ? connected : broken); },
        [this](std::string_view line) { OnLine(line); },
        [this, broken] {
          if (!done_) ++*broken;
          done_ = true;
        });
  }

  void Start() { Acquire(); }
  bool done() const { return done_; }
  int64_t protocol_errors() const { return protocol_errors_; }
  int64_t lost_events() const { return lost_events_; }
  void Close() { link_->Close(); }

 private:
  void Acquire() {
    if (load_.over()) {
      done_ = true;
      return;
    }
    pick_ = load_.Choose(index_);
    const int n = std::snprintf(
        out_, sizeof out_,
        "{\"id\":%lld,\"op\":\"acquire\",\"resource\":\"%s\",\"ttl_ms\":%lld,"
        "\"wait_ms\":%lld%s}\n",
        static_cast<long long>(++id_), pick_.resource->c_str(), static_cast<long long>(ttl_ms_),
        static_cast<long long>(pick_.hot >= 0 ? wait_ms_ : own_wait_ms_),
        kind_.fields.c_str());
    releasing_ = false;
    sent_ = Clock::now();
    link_->Send(std::string_view(out_, static_cast<size_t>(n)));
  }

  void Release(std::string_view token) {
    const int n =
        std::snprintf(out_, sizeof out_,
                      "{\"id\":%lld,\"op\":\"release\",\"resource\":\"%s\",\"token\":\"%.*s\"}\n",
                      static_cast<long long>(++id_), pick_.resource->c_str(),
                      static_cast<int>(token.size()), token.data());
    releasing_ = true;
    link_->Send(std::string_view(out_, static_cast<size_t>(n)));
    load_.ReleaseSent(pick_);
  }

  void OnLine(std::string_view line) {
    const AgentLine l = ParseAgentLine(line);
    if (l.is_event) {
      ++lost_events_;
      return;
    }
    if (l.id != id_) {
      ++protocol_errors_;
      std::fprintf(stderr, "client %d: unexpected line %.*s\n", index_,
                   static_cast<int>(line.size()), line.data());
      return;
    }
    if (!releasing_) {
      if (l.ok && l.token.size() == 40) {
        load_.Granted(pick_, sent_, kind_.role);
        Release(l.token);
        return;
      }
      load_.AcquireFailed(std::string(l.error));
    } else if (l.ok) {
      load_.CycleDone();
    } else {
      load_.ReleaseFailed(std::string(l.error));
    }
    Acquire();
  }

  int index_;
  CycleLoad& load_;
  int64_t ttl_ms_, wait_ms_, own_wait_ms_;
  HoldKind kind_;
  std::unique_ptr<AgentLink> link_;
  Pick pick_{};
  int64_t id_ = 0;
  bool releasing_ = false;
  bool done_ = false;
  int64_t protocol_errors_ = 0;
  int64_t lost_events_ = 0;
  Clock::time_point sent_;
  char out_[1024];
};

int RunCycles(const Flags& f) {
  const LoadShape shape = ShapeFromFlags(f);
  const std::string socket = f.Str("socket", "");
  if (socket.empty()) throw std::invalid_argument("--socket is required");
  const int64_t ttl_ms = f.Int("ttl-ms", 10'000);
  const int64_t wait_ms = f.Int("wait-ms", 10'000);
  const int64_t own_wait_ms = f.Int("own-wait-ms", 0);
  const std::vector<int> agent = f.Has("agent-pid")
                                     ? std::vector<int>{static_cast<int>(f.Int("agent-pid", 0))}
                                     : std::vector<int>{};
  const std::vector<int> redis = Pids(f.List("redis-pids"));
  const int64_t permits = f.Int("permits", 0);
  const int64_t shared_clients = f.Int("shared-clients", 0);
  if (permits > 0 && shared_clients > 0) {
    throw std::invalid_argument("--permits and --shared-clients: give one (a semaphore has no "
                                "read holds)");
  }

  uv_loop_t* loop = uv_default_loop();
  CycleLoad load(shape);
  int connected = 0, broken = 0;
  std::vector<std::unique_ptr<CyclingClient>> clients;
  for (int i = 0; i < shape.clients; ++i) {
    clients.push_back(std::make_unique<CyclingClient>(loop, socket, i, load, ttl_ms, wait_ms,
                                                      own_wait_ms,
                                                      KindOf(i, permits, shared_clients),
                                                      &connected, &broken));
  }
  while (connected + broken < shape.clients) uv_run(loop, UV_RUN_ONCE);
  if (broken > 0) {
    std::fprintf(stderr, "lw_bench: %d of %d connections to %s failed\n", broken, shape.clients,
                 socket.c_str());
    return 2;
  }

  const std::vector<int> self{static_cast<int>(getpid())};
  CpuWindow cpu({agent, redis, self});
  load.StartWindow(loop, [&] { cpu.Begin(); }, [&] { cpu.End(); });
  for (auto& c : clients) c->Start();
  // Until every client finished its last cycle (or its connection broke).
  for (;;) {
    bool all_done = true;
    for (auto& c : clients) all_done = all_done && c->done();
    if (all_done) break;
    uv_run(loop, UV_RUN_ONCE);
  }
  int64_t protocol_errors = 0, lost = 0;
  for (auto& c : clients) {
    protocol_errors += c->protocol_errors();
    lost += c->lost_events();
    c->Close();
  }
  uv_run(loop, UV_RUN_DEFAULT);

  Result r;
  r.Text("bench", "agent");
  r.Text("label", f.Str("label", "agent"));
  load.Report(r);
  const double k = static_cast<double>(load.cycles()) / 1000.0;
  if (!agent.empty()) r.Number("agent_cpu_s_per_1k", k > 0 ? cpu.seconds(0) / k : 0, 4);
  if (!redis.empty()) r.Number("redis_cpu_s_per_1k", k > 0 ? cpu.seconds(1) / k : 0, 4);
  r.Number("bench_cpu_s_per_1k", k > 0 ? cpu.seconds(2) / k : 0, 4);
  if (!agent.empty()) r.Number("agent_rss_kib", static_cast<double>(StatusKib(agent[0], "VmRSS")));
  r.Number("broken_connections", broken);
  r.Number("protocol_errors", static_cast<double>(protocol_errors));
  r.Number("lost_events", static_cast<double>(lost));
  if (!r.Emit(f.Str("json", ""))) return 2;
  const bool clean =
      load.failures() == 0 && broken == 0 && protocol_errors == 0 && lost == 0 && load.cycles() > 0;
  return clean ? 0 : 1;
}

}  // namespace
}  // namespace lw::bench

int main(int argc, char** argv) {
  using namespace lw::bench;
  try {
    const Flags f(argc, argv, {"socket",         "agent-pid", "redis-pids",
                               "mode",           "clients",   "seconds",
                               "warmup-seconds", "ttl-ms",    "wait-ms",
                               "prefix",         "hot-keys",  "hot-share",
                               "label",          "json",      "sessions",
                               "locks",          "masters",   "sample-keys-per-second",
                               "key-prefix",     "inflight",  "own-wait-ms",
                               "permits",        "shared-clients",
                               "load-sessions",  "think-ms",  "load-wait-ms",
                               "load-prefix",    "before-seconds", "after-seconds",
                               "grace-ms",       "upgrade-timeout-ms", "pid-file",
                               "watch-ms"},
                  {});
    if (f.Str("mode", "") == "hold") return RunHold(f);
    if (f.Str("mode", "") == "upgrade") return RunUpgradeBench(f);
    return RunCycles(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lw_bench: %s\n", e.what());
    return 2;
  }
}
