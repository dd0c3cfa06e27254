#pragma once
// FleetMember: this agent in the fleet (docs/fleet.md). Its id, which every lock value it
// writes names (fleet::LockValue); its registry record; its presence thread (heartbeat and
// holder report, fleet/presence.h); its fleet reader (fleet/reader.h); the revoke of a lock
// held through any agent; and the revoke orders other agents send on its channel.
//
// heartbeat_ttl_ms = 0 turns fleet presence off: the id still names the lock values, but no
// thread runs, nothing is written under fleet::kNamespace, no channel is listened to, and
// reader() and Revoker() are null.
//
// Threads: construction, Start, Obey and the report (HolderReportOf) on the loop thread; the
// presence and reader threads are their own; Stop on the thread that destroys the agent.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "agent/lock_service.h"
#include "config/config.h"
#include "fleet/fleet_stats.h"
#include "fleet/presence.h"
#include "fleet/reader.h"
#include "fleet/records.h"
#include "fleet/revoke.h"
#include "locking/lock_engine.h"
#include "observe/metrics.h"
#include "observe/recent.h"

namespace lw {

class FleetMember {
 public:
  using RevokeFn = std::function<fleet::RevokeResult(fleet::RevokeRequest)>;

  // A new agent id; the record from the configuration (admin_url is set by Start). The fleet's
  // own stats go on `metrics`' registry; its totals join the exposition while this agent is
  // the reporter.
  FleetMember(const Config& cfg, Metrics& metrics, int64_t started_unix_ms);
  ~FleetMember();  // Stop()
  FleetMember(const FleetMember&) = delete;
  FleetMember& operator=(const FleetMember&) = delete;

  bool enabled() const { return reader_ != nullptr; }
  const std::string& id() const { return record_.id; }
  // What every value the engine stores starts with: "<id>:" (EngineOptions::value_prefix).
  std::string value_prefix() const { return fleet::LockValue(record_.id, ""); }
  // This agent as it announces itself (admin_url set once Start ran).
  const fleet::AgentRecord& record() const { return record_; }
  // The channel revoke orders for this agent's locks arrive on.
  std::string revoke_channel() const { return fleet::RevokeChannel(record_.id); }

  // Starts the presence and reader threads (when enabled). admin_url: this agent's page ("":
  // none). report: asks the loop for the current holder report (HolderReportOf), bounded.
  void Start(std::string admin_url, fleet::FleetPresence::ReportFn report,
             fleet::FleetPresence::LayoutFn layout = nullptr);
  // The presence thread deregisters (bounded), then both threads stop. Idempotent.
  void Stop();

  fleet::FleetReader* reader() const { return reader_.get(); }
  // For the admin server (AdminContext::fleet_revoke); null when disabled.
  RevokeFn Revoker() const;

  // Loop thread: a message heard on revoke_channel(). A well-formed RevokeOrder revokes the
  // grant whose key holds exactly its value (LockEngine::RevokeGrant: its client gets `lost`,
  // reason "revoked"); the revoke is logged with who asked and added to `events`. The order
  // arrives once per master: later arrivals find no such grant and do nothing. A malformed
  // message is warned about once and ignored.
  void Obey(const std::string& message, LockEngine& engine, const LockService& service,
            EventLog& events);

 private:
  const Config& cfg_;
  fleet::AgentRecord record_;
  std::unique_ptr<fleet::FleetStats> stats_;
  std::unique_ptr<fleet::FleetReader> reader_;      // null: disabled
  std::unique_ptr<fleet::FleetPresence> presence_;  // from Start on
  std::atomic<const fleet::FleetPresence*> running_{nullptr};  // presence_, for other threads
  bool warned_malformed_ = false;
};

// Loop thread: what is held and awaited through this agent, for the holder report: the
// kMaxPublishedLocks longest-held locks and the kMaxPublishedWaiters longest waits, with their
// peers (command lines cut to kMaxCmdlineBytes on a UTF-8 boundary, or "" when share_cmdline is
// off). Never a token. Linear in the locks held (no full sort).
fleet::HolderReport HolderReportOf(const LockService& service, const LockEngine& engine,
                                   bool share_cmdline, int64_t now_unix_ms);

// Each peer's actor for the fleet's wait-for graph (Peer::actor_pid): the outermost of its
// ancestors that is one of `peers` too (a `lockwarden lock` run inside another's command is
// part of that command's process), else its own pid.
std::vector<int> ActorPids(const std::vector<const Peer*>& peers);

// This agent's page as the fleet links to it: the admin_url setting when set; otherwise
// "http://host:port" of the admin listener (a wildcard host becomes this host's name, an IPv6
// literal is bracketed), or "" while its port is unknown (0: off, or not bound yet).
std::string AdminUrlOf(const std::string& setting, const std::string& listen_host, int port);

}  // namespace lw
