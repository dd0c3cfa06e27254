#pragma once
// Agent: the whole agent on one libuv loop, built in dependency order and torn down in reverse:
// metrics and activity, the socket transport (Server) and its service (LockService), one
// NodeClient per master, the release subscribers, the LockEngine, the snapshot published
// every 250 ms for other threads, the leak scanner and presence probe (their own threads),
// the admin HTTP server (its own threads), systemd notification, and shutdown on SIGTERM.
// `lockwarden serve` (cli/serve.cc) loads the configuration and runs one.
//
// Threads: everything here runs on the loop thread except what is marked; other threads read
// snapshots and metrics, and reach loop state only through LoopCommands.

#include <uv.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "admin/admin_server.h"
#include "agent/elections.h"
#include "agent/fleet_member.h"
#include "agent/handover_state.h"
#include "agent/lock_service.h"
#include "agent/loop_commands.h"
#include "agent/request_stats.h"
#include "agent/server.h"
#include "agent/systemd_notify.h"
#include "config/config.h"
#include "core/access.h"
#include "core/client_session.h"
#include "core/unix_time.h"
#include "locking/engine_events.h"
#include "locking/engine_stats.h"
#include "locking/lock_engine.h"
#include "observe/activity.h"
#include "observe/loop_monitor.h"
#include "observe/metrics.h"
#include "observe/recent.h"
#include "observe/snapshot.h"
#include "redis/node_client.h"
#include "redis/node_stats.h"
#include "redis/release_subscribers.h"
#include "redis/timer.h"
#include "scan/leak_scanner.h"
#include "scan/presence_probe.h"
#include "scan/scan_stats.h"

namespace lw {

// The masters as configured, by their display names (metrics labels, the hand-over's check).
std::vector<std::string> MasterNames(const Config& cfg);

// The Agent is the engine's EngineEvents: a lost lock goes to its holder's connection
// (LockService) and to the page's event log (Activity); the rest to Activity.
class Agent final : private EngineEvents {
 public:
  // Resolved from the config before the loop starts (names need the host's databases).
  struct HostAccess {
    SocketAccess socket;
    AccessPolicy policy;
  };

  Agent(uv_loop_t* loop, const Config& cfg, std::string admin_token, HostAccess host);
  ~Agent() override;
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Listens on the socket, connects to the masters, starts the snapshot timer, the scanner,
  // the admin server and the signal handlers. False (logged) when the agent cannot serve.
  bool Start();
  // Before Start: this process takes over from the running agent through `channel` (the
  // LOCKWARDEN_HANDOVER_FD its upgrade gave it) instead of listening on the socket.
  void TakeOverFrom(int channel) { handover_fd_ = channel; }

 private:
  // Start's second half, once the socket is served: admin, fleet, signals, systemd. A problem
  // of the admin server is returned: at once when admin_required (a start: fatal), else after
  // the rest was started (a take-over: the connections are served already).
  std::optional<std::string> FinishStart(bool admin_required);
  // Loop thread: the state other threads may read, and the state gauges.
  void PublishSnapshot();

  void StartScanner();

  // Scanner thread: which of `candidates` are held through this agent, answered by the loop
  // after this call (so that a grant made just before is never missed); nullopt when the loop
  // does not answer within a second (busy or stopping).
  std::optional<LiveGrants> LiveAmong(const Grants& candidates);

  // Presence thread: the grants of the locks the latest detailed snapshot lists (at most 250 ms
  // old while the probe keeps asking): those an operator sees.
  GrantList GrantsNow() const;

  // Admin thread: force-release on the loop, waiting up to `timeout` for the masters' answers.
  std::optional<RevokeOutcome> RevokeFromOtherThread(const std::string& resource,
                                                     std::chrono::milliseconds timeout);

  // AdminContext::self is the fleet record as known before the bind: its admin_url is the
  // setting, or admin_listen's unless its port is 0 (then ""); the registry gets the bound one.
  std::optional<std::string> StartAdmin();
  // Fleet presence, the reader and the revoke channel (heartbeat_ttl_ms > 0), after the admin
  // server (its bound port is in the record).
  void StartFleet();
  // Presence thread: the holder report, built on the loop; nullopt when it does not answer in
  // time (busy or stopping).
  std::optional<fleet::HolderReport> HolderReportFromOtherThread();

  // EngineEvents
  void Lost(SessionId session, const std::string& resource, const std::string& token,
            std::string_view reason) override;
  void AcquireFinished(AcquireOutcome outcome, std::chrono::nanoseconds waited,
                       int attempts) override;
  void AcquireFailed(SessionId session, std::string_view resource, ErrorCode code) override;

  // SIGTERM/SIGINT: stop accepting, release every lock on all masters (bounded by
  // shutdown_grace), then close sessions and connections so the loop runs dry.
  void BeginShutdown(int sig);

  void Finish();

  // ---- the in-place upgrade, old process (agent/agent_upgrade.cc, docs/upgrade.md)
  struct Upgrade;
  // requester 0: a signal (nobody to answer). An upgrade starts the binary now at the agent's
  // path; a reload (SIGHUP) the very binary this process runs, to read the settings again.
  enum class NextBinary { kAtPath, kRunning };
  void BeginUpgrade(SessionId requester, const nlohmann::json& id,
                    NextBinary next = NextBinary::kAtPath);
  void OnChildMessage();
  // Format 3 (agent/agent_precopy.cc): the holds copied in slices while this process serves,
  // then HoldForHandOver.
  void PreCopy();
  void CopySlice();
  void HoldForHandOver();
  void SendState();
  void HandedOver();
  void AbortUpgrade(const std::string& why);
  void EndUpgradeHandles();
  // ---- the new process (agent/agent_takeover.cc)
  void AwaitMastersThenReady();
  void ReceiveState();
  [[noreturn]] void RefuseTakeOver(const std::string& why);

  uv_loop_t* loop_;
  const Config& cfg_;
  Metrics metrics_;
  EventLog events_;
  Activity activity_;  // between the engine/masters and metrics_: events and history
  RequestStats request_stats_;
  ElectionStats election_stats_;
  Server server_;  // the socket transport; service_ serves its sessions
  // Every client session's state: the engine, elections and service keep theirs in it.
  SessionTable sessions_;
  EngineStats engine_stats_;  // on metrics_'s registry
  std::vector<std::unique_ptr<NodeStats>> node_stats_;  // by master, on metrics_.registry()
  std::unique_ptr<ScanStats> scan_stats_;  // null while the scanner is off
  std::vector<std::unique_ptr<NodeClient>> nodes_;
  std::unique_ptr<ReleaseSubscribers> release_watch_;  // outlives the engine, which uses it
  // This agent in the fleet: its id names every lock value (EngineOptions::value_prefix). It
  // outlives the engine, whose revoke callbacks it gave (FleetMember::Obey).
  std::unique_ptr<FleetMember> fleet_;
  std::unique_ptr<LockEngine> engine_;
  // Reads and follows elections' leaders (its own rounds on the nodes); the service uses it.
  std::unique_ptr<Elections> elections_;
  std::unique_ptr<LockService> service_;
  SnapshotBox snapshots_;
  Timer snapshot_timer_;
  LoopMonitor loop_monitor_;  // flushed by PublishSnapshot
  LoopCommands commands_;  // admin threads -> loop
  std::string admin_token_;
  std::unique_ptr<LeakScanner> scanner_;
  std::unique_ptr<PresenceProbe> presence_;
  const int64_t started_unix_ms_ = UnixMsNow();
  std::unique_ptr<AdminServer> admin_;
  std::string admin_host_;  // the admin listener as bound (port 0: off)
  int admin_port_ = 0;
  std::vector<uv_signal_t*> signals_;
  std::unique_ptr<Timer> grace_;
  SystemdNotifier systemd_;  // no-op unless started by systemd (NOTIFY_SOCKET)
  bool shutting_down_ = false;
  bool finished_ = false;
  // The in-place upgrade.
  int handover_fd_ = -1;  // the new process's channel until it took over
  std::unique_ptr<Timer> takeover_timer_;
  std::unique_ptr<Upgrade> upgrade_;  // the old process's, while one runs
  bool handed_over_ = false;
  std::optional<std::tuple<SessionId, nlohmann::json, protocol::Upgraded>> upgrade_reply_;
};

// What the old process keeps while an upgrade runs (agent/agent_upgrade.cc).
struct Agent::Upgrade {
  SessionId requester = 0;  // 0: SIGUSR2
  nlohmann::json id;
  int channel = -1;
  uv_process_t* child = nullptr;  // freed by its close callback
  int child_pid = 0;
  std::string child_version;
  int format = 0;  // of the state: the newest the new process reads (handover::FormatFor)
  uv_poll_t* poll = nullptr;
  std::unique_ptr<Timer> deadline;
  std::unique_ptr<Timer> settle;
  bool held = false;
  bool sent = false;
  std::chrono::steady_clock::time_point held_at;
  int64_t settle_ms = 0;  // from holding requests to nothing in flight
  // What Capture took from each session: asked again here if the upgrade fails.
  std::vector<std::pair<SessionId, handover::PendingAsk>> taken;
  bool admin_stopped = false;
  int listener = -1;  // a duplicate of the listening socket while the new process has it
  // Pre-copy (format 3): the sessions whose holds are still to copy, what was copied, and what
  // changed since.
  std::vector<SessionId> to_copy;
  size_t next_to_copy = 0;
  LockService::Copied copied;
  std::unique_ptr<Timer> precopy;
  std::chrono::steady_clock::time_point precopy_started;
  size_t slices = 0;
};

}  // namespace lw
