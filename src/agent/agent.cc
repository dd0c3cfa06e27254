#include "agent/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <variant>

#include "agent/agent_id.h"
#include "agent/detached_leases.h"
#include "agent/options_from_config.h"
#include "core/build_commit.h"
#include "core/redlock_math.h"

namespace lw {
namespace {

constexpr int64_t kSnapshotMs = 250;

}  // namespace

std::vector<std::string> MasterNames(const Config& cfg) {
  std::vector<std::string> names;
  for (const auto& m : cfg.masters) names.push_back(m.Display());
  return names;
}

Agent::Agent(uv_loop_t* loop, const Config& cfg, std::string admin_token, HostAccess host)
    : loop_(loop),
      cfg_(cfg),
      metrics_(MasterNames(cfg), BuildInfo{LOCKWARDEN_VERSION, std::string(BuildCommit())}),
      activity_(events_,
                [this](uint64_t session) {
                  return service_ ? service_->Describe(session)
                                  : "session " + std::to_string(session);
                },
                UnixMsNow),
      request_stats_(metrics_.registry()),
      election_stats_(metrics_.registry()),
      server_(loop, ServerOptionsFrom(cfg, host.socket), request_stats_),
      engine_stats_(metrics_.registry(), MasterNames(cfg)),
      snapshot_timer_(loop),
      loop_monitor_(loop, metrics_.registry()),
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
    NodeClientOptions node_options = NodeClientOptionsFrom(cfg);
    node_options.stats = node_stats_.back().get();
    node_options.events = &activity_.Node(i, name);
    nodes_.push_back(std::make_unique<NodeClient>(loop, cfg.masters[i], node_options));
    raw.push_back(nodes_.back().get());
  }
  // Releases announced by other agents wake our waiters for keys held elsewhere, and an
  // election's announced change has its observers' leader read again. The engine and the
  // elections do not exist yet: the handler looks them up when an announcement arrives.
  release_watch_ = std::make_unique<ReleaseSubscribers>(
      loop, cfg.masters, SubscriberOptionsFrom(cfg),
      [this](const std::string& key) {
        if (engine_) engine_->ReleasedElsewhere(key);
        if (elections_) elections_->Announced(key);
      });
  fleet_ = std::make_unique<FleetMember>(cfg, metrics_, started_unix_ms_);
  EngineOptions engine_options = EngineOptionsFrom(cfg);
  engine_options.value_prefix = fleet_->value_prefix();
  engine_options.events = this;
  engine_options.stats = &engine_stats_;
  engine_options.release_watch = release_watch_.get();
  engine_options.sessions = &sessions_;
  engine_ = std::make_unique<LockEngine>(loop, raw, engine_options);
  ElectionOptions election_options = ElectionOptionsFrom(cfg);
  election_options.watch = release_watch_.get();
  election_options.stats = &election_stats_;
  election_options.agent_id = fleet_->record().id;
  election_options.host = fleet_->record().host;
  elections_ = std::make_unique<Elections>(
      loop, raw, sessions_, std::move(election_options),
      [this](SessionId session, std::string line) { server_.Send(session, std::move(line)); });
  ServiceOptions service_options = ServiceOptionsFrom(cfg, std::move(host.policy));
  service_options.elections = elections_.get();
  service_options.upgrade = [this](SessionId session, const nlohmann::json& id) {
    BeginUpgrade(session, id);
  };
  service_options.admin_url = [this] {  // "" while the admin listener is off (port 0)
    return admin_port_ == 0 ? std::string() : LocalUrl({admin_host_, admin_port_});
  };
  service_ = std::make_unique<LockService>(server_, sessions_, *engine_,
                                           std::move(service_options), request_stats_);
}

Agent::~Agent() {
  // Other threads first: they read snapshots and the metrics, never loop state.
  if (admin_) admin_->Stop();
  fleet_->Stop();  // deregisters from the fleet; its report asks the loop, closed by now
  if (presence_) presence_->Stop();
  if (scanner_) scanner_->Stop();
  // Stopping a node fails its commands in flight into the engine, so the engine must
  // still be alive then; after that nothing references the nodes.
  for (auto& n : nodes_) n->Stop();
  release_watch_->Stop();
  service_.reset();  // it holds a reference to the engine and the elections
  elections_.reset();
  engine_.reset();
  nodes_.clear();
}

bool Agent::Start() {
  if (handover_fd_ < 0) {
    if (auto problem = server_.Listen(*service_)) {
      spdlog::critical("{}", *problem);
      return false;
    }
  }
  if (auto problem = SaveAgentId(cfg_.socket_path, fleet_->record().id)) {
    spdlog::warn("{}: the agent's next run will not resume this run's locks", *problem);
  }
  for (auto& n : nodes_) n->Start();
  loop_monitor_.Start();
  PublishSnapshot();
  snapshot_timer_.StartRepeat(kSnapshotMs, [this] { PublishSnapshot(); });
  if (cfg_.scan_interval_ms > 0) StartScanner();
  if (handover_fd_ >= 0) {
    AwaitMastersThenReady();  // the socket and the rest come with the running agent's state
    return true;
  }
  if (auto problem = FinishStart(/*admin_required=*/true)) {
    spdlog::critical("{}", *problem);
    return false;
  }
  return true;
}

std::optional<std::string> Agent::FinishStart(bool admin_required) {
  auto admin_problem = StartAdmin();
  if (admin_problem && admin_required) return admin_problem;
  StartFleet();
  for (int signum : {SIGTERM, SIGINT, SIGUSR2, SIGHUP}) {
    auto* h = new uv_signal_t;
    uv_signal_init(loop_, h);
    h->data = this;
    uv_signal_start(h, [](uv_signal_t* s, int sig) {
      auto* self = static_cast<Agent*>(s->data);
      if (sig == SIGUSR2) {
        self->BeginUpgrade(0, nullptr);
      } else if (sig == SIGHUP) {
        spdlog::info("SIGHUP: reading the settings again through a hand-over to a new run of "
                     "this same binary (docs/configuration.md, \"Changing settings\")");
        self->BeginUpgrade(0, nullptr, NextBinary::kRunning);
      } else {
        self->BeginShutdown(sig);
      }
    }, signum);
    signals_.push_back(h);
  }
  spdlog::info("lockwarden listening on {} with {} master(s), quorum {}", cfg_.socket_path,
               nodes_.size(), engine_->quorum());
  if (cfg_.redis_tls_insecure_skip_verify) {
    spdlog::warn("redis_tls_insecure_skip_verify is on: rediss:// masters' certificates are NOT "
                 "checked, so anyone on the path to a master can pose as it and grant or steal "
                 "locks; use it for tests only");
  }
  systemd_.Start(cfg_.socket_path);  // READY=1 follows from a snapshot with a usable quorum
  return admin_problem;
}

void Agent::PublishSnapshot() {
  auto s = std::make_shared<Snapshot>();
  s->taken = std::chrono::steady_clock::now();
  s->taken_unix_ms = UnixMsNow();
  const LoopMonitor::Maxima loop = loop_monitor_.Flush(s->taken);
  s->loop_lag_max_ms = loop.lag_ms;
  s->loop_turn_max_ms = loop.turn_ms;
  s->quorum = engine_->quorum();
  s->masters = engine_->NodeStatuses();
  for (const auto& n : s->masters) {
    s->masters_up += n.up ? 1 : 0;
    s->masters_usable += n.up && !n.quarantined ? 1 : 0;
  }
  s->locks_held = engine_->locks_held();
  if (snapshots_.DetailWanted()) {
    s->detailed = true;
    s->locks = service_->ListedLocks(kMaxListedLocks, &s->listed_grants);
  }
  s->sessions = server_.session_count();
  s->waiters = engine_->waiters();
  // The list walks every resource (100k with 100k locks held): only when someone waits.
  if (s->waiters > 0) s->waiter_list = service_->Waiters(kMaxListedWaiters);
  s->oldest_wait_ms = s->waiter_list.empty() ? 0 : s->waiter_list.front().waited_ms;
  metrics_.SetState({engine_->locks_held(), s->sessions, s->waiters,
                     static_cast<int>(s->masters.size()), s->masters_up, s->quorum,
                     s->masters_usable, s->oldest_wait_ms});
  snapshots_.Publish(s);
  systemd_.Observe(*s);  // after Publish: /readyz already agrees when systemd hears READY=1
}

void Agent::StartScanner() {
  scanner_ = std::make_unique<LeakScanner>(
      ScanSettingsFrom(cfg_), std::chrono::milliseconds(cfg_.scan_interval_ms),
      [this](const Grants& candidates) { return LiveAmong(candidates); }, scan_stats_.get());
  scanner_->Start();
}

std::optional<LiveGrants> Agent::LiveAmong(const Grants& candidates) {
  using Answer = std::function<void(LiveGrants)>;
  return commands_.Ask<LiveGrants>(
      [this, candidates](Answer answer) {  // a copy: the caller may stop waiting
        if (shutting_down_) return;  // unanswered: the scanner skips its partial check
        LiveGrants live;
        for (const auto& grant : candidates) {
          if (engine_->books().FindGrant(grant.first, grant.second)) live.insert(grant);
        }
        answer(std::move(live));
      },
      std::chrono::seconds(1));
}

GrantList Agent::GrantsNow() const {
  auto snap = snapshots_.LatestDetailed(std::chrono::steady_clock::now() - std::chrono::seconds(1),
                                        std::chrono::milliseconds(500));
  if (!snap) return {};
  return snap->listed_grants;
}

std::optional<RevokeOutcome> Agent::RevokeFromOtherThread(const std::string& resource,
                                                         std::chrono::milliseconds timeout) {
  using Answer = std::function<void(RevokeOutcome)>;
  return commands_.Ask<RevokeOutcome>(
      [this, resource](Answer answer) {
        if (shutting_down_) return;  // dropped unanswered: the caller sees no answer
        engine_->Revoke(resource, [this, answer](const std::optional<LockEngine::Revocation>& r) {
          RevokeOutcome out;
          out.masters = static_cast<int>(nodes_.size());
          if (r) {
            out.held = true;
            out.session = r->session;
            const Peer peer = service_->PeerOf(r->session);
            out.pid = peer.pid;
            out.uid = peer.uid;
            out.deleted = r->deleted;
          }
          answer(out);
        });
      },
      timeout);
}

void Agent::Lost(SessionId session, const std::string& resource, const std::string& token,
                 std::string_view reason) {
  // A detached lease running out its ttl is how such a lease is meant to end.
  const bool lease_ended = IsLeaseSession(session) && reason == "expired";
  activity_.Lost(session, resource, token, reason, lease_ended ? Severity::kInfo : Severity::kError);
  service_->NotifyLost(session, resource, token, reason);
}

void Agent::AcquireFinished(AcquireOutcome outcome, std::chrono::nanoseconds waited,
                            int attempts) {
  activity_.AcquireFinished(outcome, waited, attempts);
}

void Agent::AcquireFailed(SessionId session, std::string_view resource, ErrorCode code) {
  activity_.AcquireFailed(session, resource, code);
}

std::optional<std::string> Agent::StartAdmin() {
  auto listen = std::get<std::optional<ListenAddress>>(ParseListenAddress(cfg_.admin_listen));
  if (!listen) return std::nullopt;  // "off"
  AdminContext ctx = AdminContextFrom(cfg_);
  ctx.metrics = &metrics_;
  ctx.stats = std::make_unique<AdminStats>(metrics_.registry());
  ctx.snapshots = &snapshots_;
  ctx.scanner = scanner_.get();
  ctx.token = admin_token_;
  ctx.events = &events_;
  ctx.history = [this] { return activity_.HistoryPoints(UnixMsNow()); };
  presence_ = std::make_unique<PresenceProbe>(cfg_.masters, [this] { return GrantsNow(); });
  presence_->Start();
  ctx.presence = presence_.get();
  ctx.agent = {LOCKWARDEN_VERSION, static_cast<int>(getpid()), started_unix_ms_,
               cfg_.socket_path};
  ctx.revoke = [this](const std::string& resource, std::chrono::milliseconds timeout) {
    return RevokeFromOtherThread(resource, timeout);
  };
  ctx.self = fleet_->record();
  ctx.self.admin_url = AdminUrlOf(cfg_.admin_url, listen->host, listen->port);
  ctx.fleet = fleet_->reader();
  ctx.fleet_revoke = fleet_->Revoker();
  admin_ = std::make_unique<AdminServer>(*listen, std::move(ctx));
  if (auto problem = admin_->Start()) return problem;
  admin_host_ = listen->host;
  admin_port_ = admin_->port();
  spdlog::info("admin HTTP on {}:{} (/metrics, /healthz, /readyz, /api/v1); actions {}",
               listen->host, admin_->port(), admin_token_.empty() ? "disabled" : "enabled");
  return std::nullopt;
}

void Agent::StartFleet() {
  if (!fleet_->enabled()) return;
  release_watch_->Listen(
      fleet_->revoke_channel(),
      [this](const std::string& message) {
        if (!shutting_down_) fleet_->Obey(message, *engine_, *service_, events_);
      },
      "fleet revoke orders",
      "locks held here are revoked from other agents by deleting their keys instead (the ACL "
      "in docs/security.md allows the channel)");
  fleet_->Start(AdminUrlOf(cfg_.admin_url, admin_host_, admin_port_),
                [this] { return HolderReportFromOtherThread(); },
                [this](const fleet::FleetPresence::Layout& layout) {
                  commands_.Post([this, layout] {
                    if (!shutting_down_) {
                      engine_->SetLayout(layout.mark_readers, layout.native_claims,
                                         layout.native_until);
                    }
                  });
                });
}

std::optional<fleet::HolderReport> Agent::HolderReportFromOtherThread() {
  using Answer = std::function<void(fleet::HolderReport)>;
  return commands_.Ask<fleet::HolderReport>(
      [this](Answer answer) {
        if (shutting_down_) return;  // unanswered: the presence keeps its last report
        answer(HolderReportOf(*service_, *engine_, cfg_.share_cmdline, UnixMsNow()));
      },
      std::chrono::seconds(1));
}

void Agent::BeginShutdown(int sig) {
  if (upgrade_ && !handed_over_) AbortUpgrade("signal " + std::to_string(sig) + " arrived");
  if (shutting_down_) {
    spdlog::warn("second signal {}: exiting now", sig);
    Finish();
    return;
  }
  shutting_down_ = true;
  if (cfg_.release_on_stop) {
    spdlog::info("signal {}: shutting down, releasing {} lock(s)", sig, engine_->locks_held());
  } else {
    spdlog::info("signal {}: shutting down, leaving {} lock(s) on the masters for their clients "
                 "to resume through the next run (release_on_stop = false)",
                 sig, engine_->locks_held());
  }
  systemd_.Stopping((cfg_.release_on_stop ? "releasing " : "leaving ") +
                    std::to_string(engine_->locks_held()) + " lock(s)");
  server_.StopListening();
  grace_ = std::make_unique<Timer>(loop_);
  grace_->Start(cfg_.shutdown_grace_ms, [this] {
    spdlog::warn("shutdown grace of {} ms ran out; some releases were not confirmed (their "
                 "keys expire with their ttl)", cfg_.shutdown_grace_ms);
    Finish();
  });
  engine_->Shutdown([this] { Finish(); }, cfg_.release_on_stop);
}

void Agent::Finish() {
  if (finished_) return;
  finished_ = true;
  if (grace_) grace_->Stop();
  snapshot_timer_.Stop();
  systemd_.Stop();
  commands_.Close();
  elections_->Stop();
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

}  // namespace lw
