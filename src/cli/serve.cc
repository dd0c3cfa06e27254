// `lockwarden serve`: wires config, masters, engine and socket server onto one libuv loop.

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <cstdio>
#include <memory>
#include <variant>
#include <vector>

#include "agent/server.h"
#include "cli/commands.h"
#include "locking/lock_engine.h"
#include "redis/node_client.h"

namespace lw::cli {
namespace {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("lockwarden");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
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

// Everything that lives on the loop, in construction order.
class Agent {
 public:
  Agent(uv_loop_t* loop, const Config& cfg) : loop_(loop), cfg_(cfg), server_(loop, Options(cfg)) {
    NodeClientOptions node_options{cfg.connect_timeout_ms, cfg.reconnect_max_backoff_ms,
                                   cfg.health_interval_ms};
    std::vector<Node*> raw;
    for (const auto& m : cfg.masters) {
      nodes_.push_back(std::make_unique<NodeClient>(loop, m, node_options));
      raw.push_back(nodes_.back().get());
    }
    EngineOptions engine_options{cfg.key_prefix, cfg.drift_factor, cfg.node_timeout_ms,
                                 cfg.retry_delay_ms, cfg.retry_jitter_ms};
    engine_ = std::make_unique<LockEngine>(
        loop, raw, engine_options,
        [this](SessionId s, const std::string& res, const std::string& tok,
               std::string_view why) { server_.NotifyLost(s, res, tok, why); });
    server_.SetEngine(engine_.get());
  }

  ~Agent() {
    // Stopping a node fails its commands in flight into the engine, so the engine must
    // still be alive then; after that nothing references the nodes.
    for (auto& n : nodes_) n->Stop();
    engine_.reset();
    nodes_.clear();
  }

  bool Start() {
    if (auto problem = server_.Listen()) {
      spdlog::critical("{}", *problem);
      return false;
    }
    for (auto& n : nodes_) n->Start();
    for (int signum : {SIGTERM, SIGINT}) {
      auto* h = new uv_signal_t;
      uv_signal_init(loop_, h);
      h->data = this;
      uv_signal_start(h, [](uv_signal_t* s, int sig) {
        static_cast<Agent*>(s->data)->BeginShutdown(sig);
      }, signum);
      signals_.push_back(h);
    }
    spdlog::info("lockwarden listening on {} with {} master(s), quorum {}", cfg_.socket_path,
                 nodes_.size(), engine_->quorum());
    return true;
  }

 private:
  static ServerOptions Options(const Config& cfg) {
    ServerOptions o;
    o.socket_path = cfg.socket_path;
    o.max_line_bytes = static_cast<size_t>(cfg.max_line_bytes);
    o.limits = {cfg.min_ttl_ms, cfg.max_ttl_ms, cfg.default_ttl_ms, cfg.max_wait_ms};
    return o;
  }

  // SIGTERM/SIGINT: stop accepting, release every lock on all masters (bounded by
  // shutdown_grace), then close sessions and connections so the loop runs dry.
  void BeginShutdown(int sig) {
    if (shutting_down_) {
      spdlog::warn("second signal {}: exiting now", sig);
      Finish();
      return;
    }
    shutting_down_ = true;
    spdlog::info("signal {}: shutting down, releasing {} lock(s)", sig, engine_->locks_held());
    server_.StopListening();
    grace_ = std::make_unique<Timer>(loop_);
    grace_->Start(cfg_.shutdown_grace_ms, [this] {
      spdlog::warn("shutdown grace of {} ms ran out; some releases were not confirmed (their "
                   "keys expire with their ttl)", cfg_.shutdown_grace_ms);
      Finish();
    });
    engine_->Shutdown([this] { Finish(); });
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    if (grace_) grace_->Stop();
    server_.CloseSessions();
    for (auto& n : nodes_) n->Stop();
    for (auto* h : signals_) {
      uv_close(reinterpret_cast<uv_handle_t*>(h),
               [](uv_handle_t* x) { delete reinterpret_cast<uv_signal_t*>(x); });
    }
    signals_.clear();
    spdlog::info("stopped");
  }

  uv_loop_t* loop_;
  const Config& cfg_;
  Server server_;
  std::vector<std::unique_ptr<NodeClient>> nodes_;
  std::unique_ptr<LockEngine> engine_;
  std::vector<uv_signal_t*> signals_;
  std::unique_ptr<Timer> grace_;
  bool shutting_down_ = false;
  bool finished_ = false;
};

}  // namespace

int RunServe(const ConfigSources& sources) {
  auto loaded = LoadConfig(sources);
  if (auto* err = std::get_if<std::string>(&loaded)) {
    std::fprintf(stderr, "lockwarden: configuration error: %s\n", err->c_str());
    return kExitUsage;
  }
  const Config& cfg = std::get<Config>(loaded);
  SetUpLogging(cfg.log_level);
  WarnAboutMasterCount(cfg.masters.size());
  signal(SIGPIPE, SIG_IGN);

  uv_loop_t loop;
  uv_loop_init(&loop);
  int rc = 0;
  {
    Agent agent(&loop, cfg);
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
