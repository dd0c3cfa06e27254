#include "hold.h"

#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hold_session.h"

namespace lw::bench {

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
    std::fprintf(stderr, "lw_bench: %lld of %d sessions could not connect:",
                 static_cast<long long>(tally.broken), shape.sessions);
    for (const auto& [why, n] : tally.broken_by) {
      std::fprintf(stderr, " %s x%lld", why.c_str(), static_cast<long long>(n));
    }
    std::fprintf(stderr, "\n");
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
