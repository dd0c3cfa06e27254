// `lockwarden serve`: wires config, masters, engine and socket server onto one libuv loop.

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <future>
#include <memory>
#include <thread>
#include <variant>
#include <vector>

#include "admin/admin_server.h"
#include "admin/auth.h"
#include "agent/host.h"
#include "agent/loop_commands.h"
#include "agent/server.h"
#include "agent/snapshot.h"
#include "agent/systemd_notify.h"
#include "cli/commands.h"
#include "core/redlock_math.h"
#include "core/unix_time.h"
#include "locking/lock_engine.h"
#include "observe/activity.h"
#include "observe/logging.h"
#include "observe/metrics.h"
#include "observe/recent.h"
#include "redis/node_client.h"
#include "redis/node_stats.h"
#include "redis/release_subscribers.h"
#include "scan/leak_scanner.h"
#include "scan/presence_probe.h"
#include "scan/scan_stats.h"

namespace lw::cli {
namespace {

constexpr int64_t kSnapshotMs = 250;

std::vector<std::string> MasterNames(const Config& cfg) {
  std::vector<std::string> names;
  for (const auto& m : cfg.masters) names.push_back(m.Display());
  return names;
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
  // Resolved from the config before the loop starts (names need the host's databases).
  struct HostAccess {
    SocketAccess socket;
    AccessPolicy policy;
  };

  Agent(uv_loop_t* loop, const Config& cfg, std::string admin_token, HostAccess host)
      : loop_(loop),
        cfg_(cfg),
        metrics_(MasterNames(cfg), BuildInfo{LOCKWARDEN_VERSION, LOCKWARDEN_GIT_COMMIT}),
        activity_(metrics_.engine(), events_,
                  [this](uint64_t session) { return DescribeSession(session); }, UnixMsNow),
        server_(loop, Options(cfg, metrics_, std::move(host))),
        snapshot_timer_(loop),
        commands_(loop),
        admin_token_(std::move(admin_token)),
        systemd_(loop) {
    if (cfg.scan_interval_ms > 0) {
      scan_stats_ = std::make_unique<ScanStats>(metrics_.registry(), MasterNames(cfg),
                                                std::chrono::milliseconds(cfg.scan_interval_ms));
    }
    std::vector<Node*> raw;
    for (size_t i = 0; i < cfg.masters.size(); ++i) {
      const std::string name = cfg.masters[i].Display();
      node_stats_.push_back(std::make_unique<NodeStats>(metrics_.registry(), name));
      NodeClientOptions node_options;
      node_options.connect_timeout_ms = cfg.connect_timeout_ms;
      node_options.reconnect_max_backoff_ms = cfg.reconnect_max_backoff_ms;
      node_options.health_interval_ms = cfg.health_interval_ms;
      node_options.stats = node_stats_.back().get();
      node_options.events = &activity_.Node(i, name);
      node_options.max_ttl_ms = cfg.max_ttl_ms;
      node_options.restart_quarantine = cfg.restart_quarantine;
      nodes_.push_back(std::make_unique<NodeClient>(loop, cfg.masters[i], node_options));
      raw.push_back(nodes_.back().get());
    }
    // Releases announced by other agents wake our waiters for keys held elsewhere. The engine
    // does not exist yet: the handler looks it up when an announcement arrives.
    release_watch_ = std::make_unique<ReleaseSubscribers>(
        loop, cfg.masters,
        SubscriberOptions{cfg.connect_timeout_ms, cfg.reconnect_max_backoff_ms},
        [this](const std::string& key) {
          if (engine_ && engine_->ReleasedElsewhere(key)) metrics_.CountReleaseWakeup();
        });
    EngineOptions engine_options;
    engine_options.key_prefix = cfg.key_prefix;
    engine_options.fence_prefix = cfg.fence_prefix;
    engine_options.fence_quorum = static_cast<int>(cfg.fence_quorum);
    engine_options.drift_factor = cfg.drift_factor;
    engine_options.node_timeout_ms = cfg.node_timeout_ms;
    engine_options.retry_delay_ms = cfg.retry_delay_ms;
    engine_options.retry_jitter_ms = cfg.retry_jitter_ms;
    engine_options.observer = &activity_;
    engine_options.release_watch = release_watch_.get();
    engine_options.max_waiters_per_resource = static_cast<size_t>(cfg.max_waiters_per_resource);
    engine_ = std::make_unique<LockEngine>(
        loop, raw, engine_options,
        [this](SessionId s, const std::string& res, const std::string& tok,
               std::string_view why) {
          activity_.Lost(s, res, why);
          server_.NotifyLost(s, res, tok, why);
        });
    server_.SetEngine(engine_.get());
  }

  ~Agent() {
    // Other threads first: they read snapshots and the metrics, never loop state.
    if (admin_) admin_->Stop();
    if (presence_) presence_->Stop();
    if (scanner_) scanner_->Stop();
    // Stopping a node fails its commands in flight into the engine, so the engine must
    // still be alive then; after that nothing references the nodes.
    for (auto& n : nodes_) n->Stop();
    release_watch_->Stop();
    engine_.reset();
    nodes_.clear();
  }

  bool Start() {
    if (auto problem = server_.Listen()) {
      spdlog::critical("{}", *problem);
      return false;
    }
    for (auto& n : nodes_) n->Start();
    PublishSnapshot();
    snapshot_timer_.StartRepeat(kSnapshotMs, [this] { PublishSnapshot(); });
    if (cfg_.scan_interval_ms > 0) StartScanner();
    if (auto problem = StartAdmin()) {
      spdlog::critical("{}", *problem);
      return false;
    }
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
    systemd_.Start(cfg_.socket_path);  // READY=1 follows from a snapshot with a usable quorum
    return true;
  }

 private:
  static ServerOptions Options(const Config& cfg, Metrics& metrics, HostAccess host) {
    ServerOptions o;
    o.socket_path = cfg.socket_path;
    o.max_line_bytes = static_cast<size_t>(cfg.max_line_bytes);
    o.limits = {cfg.min_ttl_ms, cfg.max_ttl_ms, cfg.default_ttl_ms, cfg.max_wait_ms};
    o.client_limits = {static_cast<size_t>(cfg.max_connections),
                       static_cast<size_t>(cfg.max_inflight_per_session),
                       static_cast<size_t>(cfg.max_locks_per_session), cfg.idle_timeout_ms,
                       static_cast<size_t>(cfg.max_unsent_bytes)};
    o.socket_access = host.socket;
    o.access = std::move(host.policy);
    o.observer = &metrics.requests();
    return o;
  }

  // Loop thread: the state other threads may read, and the state gauges.
  void PublishSnapshot() {
    auto s = std::make_shared<Snapshot>();
    s->taken = std::chrono::steady_clock::now();
    s->taken_unix_ms = UnixMsNow();
    s->quorum = engine_->quorum();
    s->masters = engine_->NodeStatuses();
    for (const auto& n : s->masters) {
      s->masters_up += n.up ? 1 : 0;
      s->masters_usable += n.up && !n.quarantined ? 1 : 0;
    }
    s->locks_held = engine_->locks_held();
    if (snapshots_.DetailWanted()) {
      s->detailed = true;
      for (const auto& l : engine_->AllLocks()) {
        Server::Peer peer = server_.PeerOf(l.session);
        s->locks.push_back({l.resource, l.session, peer.pid, peer.uid, peer.gid, l.held_ms,
                            l.validity_ms, l.renew, l.waiters, l.ttl_ms, l.key,
                            std::move(peer.cmdline)});
      }
      for (auto& grant : engine_->HeldGrants()) s->held_grants.insert(std::move(grant));
    }
    s->sessions = server_.session_count();
    s->waiters = engine_->waiters();
    metrics_.SetState({engine_->locks_held(), s->sessions, s->waiters,
                       static_cast<int>(s->masters.size()), s->masters_up, s->quorum,
                       s->masters_usable});
    snapshots_.Publish(s);
    systemd_.Observe(*s);  // after Publish: /readyz already agrees when systemd hears READY=1
  }

  void StartScanner() {
    scanner_ = std::make_unique<LeakScanner>(
        ScanSettingsFrom(cfg_), std::chrono::milliseconds(cfg_.scan_interval_ms),
        [this] { return GrantsAsOfNow(); },
        scan_stats_.get());
    scanner_->Start();
  }

  // Scanner thread: the grants held through this agent, from a snapshot taken after this call
  // (waits up to a second for it), so that a grant made just before is never missed.
  std::optional<LiveGrants> GrantsAsOfNow() const {
    auto snap = snapshots_.LatestDetailed(std::chrono::steady_clock::now(), std::chrono::seconds(1));
    if (!snap) return std::nullopt;
    return snap->held_grants;
  }

  // "pid 4242 (python3 worker.py)" for events; loop thread.
  std::string DescribeSession(uint64_t session) const {
    const Server::Peer peer = server_.PeerOf(session);
    if (peer.pid < 0) return "session " + std::to_string(session) + " (closed)";
    std::string who = "pid " + std::to_string(peer.pid);
    if (!peer.cmdline.empty()) who += " (" + peer.cmdline.substr(0, 80) + ")";
    return who;
  }

  // Presence thread: the grants of the latest detailed snapshot (at most 250 ms old while
  // the probe keeps asking).
  GrantList GrantsNow() const {
    auto snap = snapshots_.LatestDetailed(std::chrono::steady_clock::now() - std::chrono::seconds(1),
                                          std::chrono::milliseconds(500));
    if (!snap) return {};
    return GrantList(snap->held_grants.begin(), snap->held_grants.end());
  }

  // Admin thread: force-release on the loop, waiting up to `timeout` for the masters' answers.
  std::optional<RevokeOutcome> RevokeFromOtherThread(const std::string& resource,
                                                     std::chrono::milliseconds timeout) {
    auto promise = std::make_shared<std::promise<RevokeOutcome>>();
    auto result = promise->get_future();
    const bool posted = commands_.Post([this, resource, promise] {
      if (shutting_down_) return;  // the promise is dropped: the caller sees no answer
      engine_->Revoke(resource, [this, promise](const std::optional<LockEngine::Revocation>& r) {
        RevokeOutcome out;
        out.masters = static_cast<int>(nodes_.size());
        if (r) {
          out.held = true;
          out.session = r->session;
          const Server::Peer peer = server_.PeerOf(r->session);
          out.pid = peer.pid;
          out.uid = peer.uid;
          out.deleted = r->deleted;
        }
        promise->set_value(out);
      });
    });
    if (!posted || result.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    try {
      return result.get();
    } catch (const std::future_error&) {
      return std::nullopt;  // dropped unanswered (shutdown)
    }
  }

  std::optional<std::string> StartAdmin() {
    auto listen = std::get<std::optional<ListenAddress>>(ParseListenAddress(cfg_.admin_listen));
    if (!listen) return std::nullopt;  // "off"
    AdminContext ctx;
    ctx.metrics = &metrics_;
    ctx.snapshots = &snapshots_;
    ctx.scanner = scanner_.get();
    ctx.masters = cfg_.masters;
    ctx.max_ttl_ms = cfg_.max_ttl_ms;
    ctx.token = admin_token_;
    ctx.events = &events_;
    ctx.history = [this] { return activity_.HistoryPoints(UnixMsNow()); };
    presence_ = std::make_unique<PresenceProbe>(cfg_.masters, [this] { return GrantsNow(); });
    presence_->Start();
    ctx.presence = presence_.get();
    ctx.agent = {LOCKWARDEN_VERSION, static_cast<int>(getpid()), started_unix_ms_,
                 cfg_.socket_path};
    ctx.stuck_after_ms = cfg_.stuck_after_ms;
    ctx.max_connections = cfg_.admin_max_connections;
    ctx.http_timeout = std::chrono::milliseconds(cfg_.admin_timeout_ms);
    ctx.max_body_bytes = cfg_.admin_max_body_bytes;
    ctx.revoke = [this](const std::string& resource, std::chrono::milliseconds timeout) {
      return RevokeFromOtherThread(resource, timeout);
    };
    admin_ = std::make_unique<AdminServer>(*listen, std::move(ctx));
    if (auto problem = admin_->Start()) return problem;
    spdlog::info("admin HTTP on {}:{} (/metrics, /healthz, /readyz, /api/v1); actions {}",
                 listen->host, admin_->port(), admin_token_.empty() ? "disabled" : "enabled");
    return std::nullopt;
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
    systemd_.Stopping(engine_->locks_held());
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
    snapshot_timer_.Stop();
    systemd_.Stop();
    commands_.Close();
    server_.CloseSessions();
    for (auto& n : nodes_) n->Stop();
    release_watch_->Stop();
    for (auto* h : signals_) {
      uv_close(reinterpret_cast<uv_handle_t*>(h),
               [](uv_handle_t* x) { delete reinterpret_cast<uv_signal_t*>(x); });
    }
    signals_.clear();
    spdlog::info("stopped");
  }

  uv_loop_t* loop_;
  const Config& cfg_;
  Metrics metrics_;
  EventLog events_;
  Activity activity_;  // between the engine/masters and metrics_: events and history
  std::vector<std::unique_ptr<NodeStats>> node_stats_;  // by master, on metrics_.registry()
  std::unique_ptr<ScanStats> scan_stats_;  // null while the scanner is off
  Server server_;
  std::vector<std::unique_ptr<NodeClient>> nodes_;
  std::unique_ptr<ReleaseSubscribers> release_watch_;  // outlives the engine, which uses it
  std::unique_ptr<LockEngine> engine_;
  SnapshotBox snapshots_;
  Timer snapshot_timer_;
  LoopCommands commands_;  // admin threads -> loop
  std::string admin_token_;
  std::unique_ptr<LeakScanner> scanner_;
  std::unique_ptr<PresenceProbe> presence_;
  const int64_t started_unix_ms_ = UnixMsNow();
  std::unique_ptr<AdminServer> admin_;
  std::vector<uv_signal_t*> signals_;
  std::unique_ptr<Timer> grace_;
  SystemdNotifier systemd_;  // no-op unless started by systemd (NOTIFY_SOCKET)
  bool shutting_down_ = false;
  bool finished_ = false;
};

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

  uv_loop_t loop;
  uv_loop_init(&loop);
  int rc = 0;
  {
    Agent agent(&loop, cfg, std::move(admin_token),
                {std::get<SocketAccess>(socket_access),
                 std::get<AccessPolicy>(std::move(policy))});
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
