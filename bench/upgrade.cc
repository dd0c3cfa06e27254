#include "upgrade.h"

#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent_link.h"
#include "hold_session.h"
#include "upgrade_load.h"

namespace lw::bench {
namespace {

constexpr int64_t kHeldId = 2'000'000'000;  // the `held` check's request on every session

// An integer field of a compact reply line ("name":123), or nullopt.
std::optional<int64_t> ReplyInt(std::string_view line, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\":";
  const auto at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string rest(line.substr(at + key.size(), 24));
  char* end = nullptr;
  const long long v = std::strtoll(rest.c_str(), &end, 10);
  if (end == rest.c_str()) return std::nullopt;
  return v;
}

std::string ReplyText(std::string_view line, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\":\"";
  const auto at = line.find(key);
  if (at == std::string_view::npos) return "";
  const auto from = at + key.size();
  const auto end = line.find('"', from);
  return std::string(line.substr(from, end == std::string_view::npos ? 0 : end - from));
}

// True when the process has exited (no /proc entry, or a zombie nobody has reaped yet).
bool Exited(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return true;
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z' ||
         line[close + 2] == 'X';
}

// The upgrade request, on a connection of its own, and its reply (from the new process).
struct UpgradeCall {
  std::unique_ptr<AgentLink> link;
  int connected = 0;
  bool answered = false, ok = false, closed = false;
  std::string reply;
  Clock::time_point sent, answered_at;
};

// Runs the loop until pred() holds or `seconds` pass; false on the timeout. A timer wakes the
// loop so that the deadline is seen even when nothing else happens.
template <class Pred>
bool RunFor(uv_loop_t* loop, double seconds, Pred pred) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
  uv_timer_t wake;
  uv_timer_init(loop, &wake);
  uv_timer_start(&wake, [](uv_timer_t*) {}, 20, 20);
  bool met = true;
  while (!pred()) {
    if (Clock::now() >= until) {
      met = false;
      break;
    }
    uv_run(loop, UV_RUN_ONCE);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&wake), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);  // lets the close finish before `wake` goes out of scope
  return met;
}

}  // namespace

int RunUpgradeBench(const Flags& f) {
  HoldShape shape;
  shape.sessions = static_cast<int>(f.Int("sessions", 1000));
  shape.locks = static_cast<int>(f.Int("locks", 100));
  shape.ttl_ms = f.Int("ttl-ms", 30'000);
  shape.wait_ms = f.Int("wait-ms", 10'000);
  shape.inflight = static_cast<int>(f.Int("inflight", 256));
  shape.prefix = f.Str("prefix", "upgrade/");
  shape.key_prefix = f.Str("key-prefix", "lock:");
  shape.sample_rate = f.Real("sample-keys-per-second", 10'000);
  LoadShapeU load;
  load.prefix = f.Str("load-prefix", "upgrade-load/");
  load.wait_ms = f.Int("load-wait-ms", 10'000);
  load.think_ms = f.Int("think-ms", 1000);
  const int load_sessions =
      static_cast<int>(std::clamp<int64_t>(f.Int("load-sessions", shape.sessions), 0,
                                           shape.sessions));
  const double before_s = f.Real("before-seconds", 5);
  const double after_s = f.Real("after-seconds", 5);
  const double grace_s = static_cast<double>(f.Int("grace-ms", 200)) / 1000.0;
  const double watch_s = static_cast<double>(f.Int("watch-ms", shape.ttl_ms + 1000)) / 1000.0;
  const double upgrade_timeout_s = static_cast<double>(f.Int("upgrade-timeout-ms", 60'000)) / 1e3;
  const std::string socket = f.Str("socket", "");
  const auto masters = f.List("masters");
  if (socket.empty() || masters.empty() || !f.Has("agent-pid")) {
    throw std::invalid_argument("upgrade mode needs --socket, --agent-pid and --masters");
  }
  const int old_pid = static_cast<int>(f.Int("agent-pid", 0));
  const int64_t total = static_cast<int64_t>(shape.sessions) * shape.locks;

  uv_loop_t* loop = uv_default_loop();
  Tally tally;
  std::vector<int> granted_order;
  granted_order.reserve(static_cast<size_t>(total));
  std::vector<std::unique_ptr<HoldingSession>> sessions;
  Pacer pacer(shape.inflight);
  int connected = 0;
  for (int s = 0; s < shape.sessions; ++s) {  // in batches: the listen backlog is not the limit
    sessions.push_back(std::make_unique<HoldingSession>(loop, socket, s, shape, tally, pacer,
                                                        granted_order, &connected));
    pacer.Add(sessions.back().get());
    if ((s + 1) % 64 == 0) RunUntil(loop, [&] { return connected == s + 1; });
  }
  RunUntil(loop, [&] { return connected == shape.sessions; });
  UpgradeCall up;
  up.link = std::make_unique<AgentLink>(
      loop, socket, [&up](int status) { up.connected = status == 0 ? 1 : -1; },
      [&up](std::string_view line) {
        if (up.answered) return;
        up.answered = true;
        up.answered_at = Clock::now();
        up.reply = std::string(line);
        up.ok = ParseAgentLine(line).ok;
      },
      [&up] { up.closed = true; });
  RunUntil(loop, [&] { return up.connected != 0; });
  if (tally.broken > 0 || up.connected < 0) {
    std::fprintf(stderr, "lw_bench upgrade: %lld of %d sessions could not connect\n",
                 static_cast<long long>(tally.broken) + (up.connected < 0 ? 1 : 0),
                 shape.sessions + 1);
    return 2;
  }

  // Every session's `held` reply: how many of its own hold locks it lists (-1: not answered).
  std::vector<int> held_listed(sessions.size(), -1);
  const auto t0 = Clock::now();
  LoadRecord record(t0);
  std::vector<std::unique_ptr<LoadCycler>> cyclers;
  std::vector<LoadCycler*> cycler_of(sessions.size(), nullptr);
  for (int i = 0; i < load_sessions; ++i) {  // spread evenly over the sessions
    const auto s = static_cast<size_t>(static_cast<int64_t>(i) * shape.sessions / load_sessions);
    cyclers.push_back(std::make_unique<LoadCycler>(loop, *sessions[s], load, record));
    cycler_of[s] = cyclers.back().get();
  }
  for (size_t s = 0; s < sessions.size(); ++s) {
    const std::string mine = "\"resource\":\"" + shape.prefix + std::to_string(s) + "/";
    sessions[s]->SetOtherLine([&, s, mine](const AgentLine& a, std::string_view line) {
      if (a.id == kHeldId) {
        int n = 0;
        for (auto at = line.find(mine); at != std::string_view::npos; at = line.find(mine, at + 1))
          ++n;
        held_listed[s] = a.ok ? n : -1;
        if (!a.ok) ++tally.protocol_errors;
        return true;
      }
      return cycler_of[s] != nullptr && cycler_of[s]->OnLine(a, line);
    });
  }

  RenewalSampler sampler(loop, masters[0], shape, granted_order);
  pacer.Pump();
  RunUntil(loop, [&] { return tally.answered == total || tally.broken > 0; });
  const double acquire_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::fprintf(stderr, "lw_bench upgrade: %lld of %lld locks acquired in %.1f s\n",
               static_cast<long long>(tally.acquired), static_cast<long long>(total),
               acquire_seconds);
  const int64_t rss_before = StatusKib(old_pid, "VmRSS");

  // The load, the upgrade in the middle of it, then the load for after_s more.
  std::mt19937_64 rng(1);
  for (auto& c : cyclers) {
    c->Start(load.think_ms > 0 ? rng() % static_cast<uint64_t>(load.think_ms) : 0);
  }
  RunFor(loop, before_s, [&] { return tally.broken > 0; });
  std::fprintf(stderr, "lw_bench upgrade: %.1f s of load; sending upgrade\n", before_s);
  up.sent = Clock::now();
  up.link->Send("{\"id\":\"bench-upgrade\",\"op\":\"upgrade\"}\n");
  RunFor(loop, upgrade_timeout_s, [&] { return up.answered || up.closed; });
  if (!up.answered) up.answered_at = Clock::now();
  const double wall_ms = Micros(up.answered_at - up.sent) / 1000.0;
  const int new_pid = static_cast<int>(ReplyInt(up.reply, "pid").value_or(0));
  const int previous_pid = static_cast<int>(ReplyInt(up.reply, "previous_pid").value_or(0));
  if (f.Has("pid-file") && up.ok && new_pid > 0) {
    std::ofstream(f.Str("pid-file", "")) << new_pid << "\n";
  }
  std::fprintf(stderr, "lw_bench upgrade: reply after %.1f ms: %s\n", wall_ms,
               up.answered ? up.reply.c_str() : up.closed ? "(connection closed)" : "(none)");
  RunFor(loop, after_s + grace_s, [&] { return tally.broken > 0; });

  for (auto& c : cyclers) c->Stop();
  const bool load_stopped = RunFor(loop, 30, [&] {
    return std::all_of(cyclers.begin(), cyclers.end(), [](const auto& c) { return c->done(); });
  });
  // Every hold the new process took over must have come to a renewal of its own by now (or
  // been reported lost): wait until watch_s after the reply, the sampler still running.
  const double watched = std::chrono::duration<double>(Clock::now() - up.answered_at).count();
  if (watched < watch_s) {
    std::fprintf(stderr, "lw_bench upgrade: load stopped; watching until %.1f s after the reply\n",
                 watch_s);
    RunFor(loop, watch_s - watched, [&] { return tally.broken > 0; });
  }
  sampler.Stop();

  // 0 lost: every session still open and listing every lock it was granted.
  const std::string held = "{\"id\":" + std::to_string(kHeldId) + ",\"op\":\"held\"}\n";
  for (auto& s : sessions) s->Send(held);
  const bool held_answered = RunFor(loop, 60, [&] {
    return tally.broken > 0 ||
           std::none_of(held_listed.begin(), held_listed.end(), [](int n) { return n < 0; });
  });
  int64_t held_total = 0, sessions_short = 0, sessions_open = 0;
  for (size_t s = 0; s < sessions.size(); ++s) {
    held_total += std::max(0, held_listed[s]);
    if (held_listed[s] != sessions[s]->granted() || held_listed[s] != shape.locks) ++sessions_short;
    if (sessions[s]->open() && !sessions[s]->broken()) ++sessions_open;
  }
  const int64_t rss_after = new_pid > 0 ? StatusKib(new_pid, "VmRSS") : -1;
  const bool new_runs = new_pid > 0 && !Exited(new_pid);
  bool old_exited = false;
  RunFor(loop, 10, [&] { return (old_exited = Exited(old_pid)); });

  // Release everything through the new process: a not_held there is a lock lost on the way.
  for (auto& s : sessions) s->StartReleasing();
  pacer.Pump();
  RunFor(loop, 120, [&] { return tally.release_answered == tally.acquired || tally.broken > 0; });
  for (auto& c : cyclers) c->Close();
  for (auto& s : sessions) s->Close();
  up.link->Close();
  uv_run(loop, UV_RUN_DEFAULT);

  Result r;
  r.Text("bench", "agent");
  r.Text("label", f.Str("label", "upgrade"));
  r.Text("mode", "upgrade");
  r.Number("sessions", shape.sessions);
  r.Number("locks", static_cast<double>(total));
  r.Number("ttl_ms", static_cast<double>(shape.ttl_ms));
  r.Number("load_sessions", load_sessions);
  r.Number("think_ms", static_cast<double>(load.think_ms));
  r.Number("acquired", static_cast<double>(tally.acquired));
  r.Number("acquire_failed", static_cast<double>(tally.acquire_failed));
  for (const auto& [code, n] : tally.acquire_errors) {
    r.Number("acquire_failed_" + code, static_cast<double>(n));
  }
  r.Number("acquire_seconds", acquire_seconds, 2);
  r.Number("upgrade_ok", up.ok ? 1 : 0);
  r.Number("upgrade_wall_ms", wall_ms, 1);
  r.Number("handover_ms", static_cast<double>(ReplyInt(up.reply, "handover_ms").value_or(-1)));
  r.Number("handed_sessions", static_cast<double>(ReplyInt(up.reply, "sessions").value_or(-1)));
  r.Number("handed_locks", static_cast<double>(ReplyInt(up.reply, "locks").value_or(-1)));
  r.Text("version", ReplyText(up.reply, "version"));
  if (!up.ok) {  // the old agent's reason; Result does not escape, so no quotes or backslashes
    std::string why = up.answered ? ReplyText(up.reply, "message") : "no reply";
    std::replace_if(why.begin(), why.end(), [](char c) { return c == '"' || c == '\\'; }, '\'');
    r.Text("upgrade_error", why);
  }
  r.Number("previous_pid", previous_pid);
  r.Number("new_pid", new_pid);
  r.Number("old_exited", old_exited ? 1 : 0);
  r.Number("new_running", new_runs ? 1 : 0);
  record.Report(r, record.Since(up.sent), record.Since(up.answered_at), grace_s);
  r.Number("held_listed", static_cast<double>(held_total));
  r.Number("sessions_not_listing_all", static_cast<double>(sessions_short));
  r.Number("sessions_open", static_cast<double>(sessions_open));
  r.Number("rss_before_kib", static_cast<double>(rss_before));
  r.Number("rss_after_kib", static_cast<double>(rss_after));
  sampler.Report(r);
  r.Number("lost_events", static_cast<double>(tally.lost_events));
  r.Number("released_ok", static_cast<double>(tally.released_ok));
  r.Number("release_not_held", static_cast<double>(tally.release_not_held));
  r.Number("release_failed_other", static_cast<double>(tally.release_other));
  r.Number("broken_connections", static_cast<double>(tally.broken + (up.closed ? 1 : 0)));
  r.Number("protocol_errors", static_cast<double>(tally.protocol_errors));
  if (!r.Emit(f.Str("json", ""))) return 2;
  const bool clean =
      tally.acquired == total && up.ok && new_pid > 0 && new_pid != previous_pid &&
      previous_pid == old_pid && old_exited && new_runs && load_stopped && held_answered &&
      held_total == total && sessions_short == 0 && sessions_open == shape.sessions &&
      tally.lost_events == 0 && tally.broken == 0 && !up.closed && tally.protocol_errors == 0 &&
      record.failures() == 0 && tally.released_ok == total && tally.release_not_held == 0 &&
      tally.release_other == 0;
  return clean ? 0 : 1;
}

}  // namespace lw::bench
