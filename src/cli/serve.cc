// `lockwarden serve`: loads and checks the configuration, prepares the host (file limit,
// SIGPIPE), and runs one Agent (agent/agent.h) on a libuv loop until it stops.

#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <variant>

#include "admin/auth.h"
#include "agent/agent.h"
#include "agent/host.h"
#include "cli/commands.h"
#include "core/redlock_math.h"
#include "observe/logging.h"
#include "observe/loop_monitor.h"

namespace lw::cli {
namespace {

// One malloc arena for the whole agent, unless MALLOC_ARENA_MAX says otherwise. glibc gives
// each thread that allocates an arena of its own (up to eight per core), and what the admin,
// fleet and scanner threads free stays in theirs: at 100,000 held locks the agent ended at
// 135-180 MiB RSS around a heap of about 85 MiB. One arena ends it at the heap plus the
// binary (bench/fleet.md, "The agent's memory"); threads other than the loop allocate little,
// and glibc's per-thread cache serves small blocks without the arena's lock.
void KeepOneHeap() {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 1);
}

void WarnAboutMasterCount(size_t n) {
  if (n == 1) {
    spdlog::warn("only one master: no fault tolerance; a restart of it without persistence can "
                 "grant a lock twice. Use 3 or 5 independent masters in production");
  } else if (n % 2 == 0) {
    spdlog::warn("{} masters: an even count tolerates no more failures than {}; an odd count "
                 "is recommended", n, n - 1);
  }
}

}  // namespace

int RunServe(const ConfigSources& sources, bool check_only) {
  auto loaded = LoadConfig(sources);
  if (auto* err = std::get_if<std::string>(&loaded)) {
    std::fprintf(stderr, "lockwarden: configuration error: %s\n", err->c_str());
    return kExitUsage;
  }
  const Config& cfg = std::get<Config>(loaded);
  std::string admin_token;
  if (!cfg.admin_token_file.empty()) {
    if (auto error = ReadTokenFile(cfg.admin_token_file, admin_token)) {
      std::fprintf(stderr, "lockwarden: configuration error: %s\n", error->c_str());
      return kExitUsage;
    }
  }
  auto socket_access = ResolveSocketAccess(cfg);
  if (auto* error = std::get_if<std::string>(&socket_access)) {
    std::fprintf(stderr, "lockwarden: configuration error: %s\n", error->c_str());
    return kExitUsage;
  }
  auto policy = AccessPolicy::Build(cfg.access, SystemNameResolver());
  if (auto* error = std::get_if<std::string>(&policy)) {
    std::fprintf(stderr, "lockwarden: configuration error: access: %s\n", error->c_str());
    return kExitUsage;
  }
  if (check_only) {
    std::printf("configuration OK: socket %s, %zu master(s), quorum %d, admin %s\n",
                cfg.socket_path.c_str(), cfg.masters.size(),
                QuorumSize(static_cast<int>(cfg.masters.size())), cfg.admin_listen.c_str());
    return 0;
  }
  SetUpLogging(cfg.log_level);
  WarnAboutMasterCount(cfg.masters.size());
  // Per master: a lock connection, a subscriber, a scanner and a presence connection.
  const size_t descriptors = static_cast<size_t>(cfg.max_connections + cfg.admin_max_connections) +
                             4 * cfg.masters.size() + 64;
  if (std::string warning = RaiseFileLimit(descriptors); !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  if (!std::get<AccessPolicy>(policy).open()) {
    spdlog::info("access rules: {} (a peer no rule allows gets forbidden)",
                 std::get<AccessPolicy>(policy).size());
  }
  signal(SIGPIPE, SIG_IGN);
  KeepOneHeap();

  uv_loop_t loop;
  uv_loop_init(&loop);
  if (int err = LoopMonitor::Configure(&loop)) {
    spdlog::warn("the event loop cannot measure its idle time ({}): "
                 "lockwarden_loop_turn_seconds counts its waits for I/O too", uv_strerror(err));
  }
  int rc = 0;
  {
    Agent agent(&loop, cfg, std::move(admin_token),
                {std::get<SocketAccess>(socket_access),
                 std::get<AccessPolicy>(std::move(policy))});
    if (const char* channel = std::getenv("LOCKWARDEN_HANDOVER_FD")) {
      agent.TakeOverFrom(std::atoi(channel));  // an upgrade of the running agent started us
      unsetenv("LOCKWARDEN_HANDOVER_FD");
    }
    if (agent.Start()) {
      uv_run(&loop, UV_RUN_DEFAULT);
    } else {
      rc = 1;
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // let handles closed by destructors finish closing
  uv_loop_close(&loop);
  return rc;
}

}  // namespace lw::cli
