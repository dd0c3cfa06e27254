#pragma once
// FleetPresence: this agent's entry in the fleet registry and its holder report, written on
// every master from its own thread with its own blocking connections (a slow master never
// delays a grant). Every heartbeat_ttl/3 it asks the loop for a HolderReport (report(); the
// loop answers from its own state, bounded), then on each master, in one pipeline: the
// AgentRecord with PX heartbeat_ttl, the index ZADD, a prune of index members long expired,
// and the report (rewritten when it changed, otherwise only its ttl refreshed). Stop() deletes
// the entry, the report and the index member on every master, so a stopped agent leaves the
// registry at once; a killed one leaves it when heartbeat_ttl runs out.
//
// It also runs the reporter election (fleet totals are exported by one agent only; see
// docs/observability.md): it tries SET ReporterKey id NX PX 3*period on each master and keeps
// it with compare-and-pexpire; it is the reporter while a quorum of masters says so.
//
// A master that fails is retried at the next heartbeat; failures are counted and logged once
// per master until it works again. Writing is refused by an ACL without the lockwarden:* keys:
// that is logged (docs/security.md has the ACL) and the agent works on without fleet presence.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/master_address.h"
#include "fleet/fleet_stats.h"
#include "fleet/records.h"

namespace lw::fleet {

struct PresenceSettings {
  std::vector<MasterAddress> masters;
  AgentRecord record;  // heartbeat_unix_ms is set at each write
  // This agent marks read holds: it says so beside its index entry (MarkingIndexKey), and each
  // heartbeat also reads which live agents do (LayoutFn).
  bool marks_readers = false;
  // The engine's node timeout: how long a native claim sent under an expiring verdict may still
  // be in flight (Layout::mark_readers' grace).
  std::chrono::milliseconds node_timeout{50};
  std::chrono::milliseconds heartbeat_ttl{10'000};
  std::chrono::milliseconds connect_timeout{1'000};
  std::chrono::milliseconds command_timeout{2'000};
};

class FleetPresence {
 public:
  // report: called on this object's thread; asks the loop for the current report and waits a
  // bounded time. nullopt: no answer in time (the previous report is kept, its ttl refreshed).
  using ReportFn = std::function<std::optional<HolderReport>()>;
  // What each heartbeat found for the key layout (docs/safety.md §7, "Marked readers").
  struct Layout {
    // Plain exclusive acquires may be native SET NX: this agent marks readers, a quorum of
    // masters answered, none lists a live agent that does not mark them, and so since
    // max_ttl_ms (the longest any unmarked read hold can have lived on) or longer. false at
    // once otherwise.
    bool native_claims = false;
    // ...and only until then: the heartbeat's start (after the report, as it reads the
    // masters) plus the heartbeat ttl. A verdict is never trusted past that, however late the
    // next heartbeat is.
    std::chrono::steady_clock::time_point native_until;
    // This agent's read holds leave the mark. Always where it marks readers; where it does not,
    // until heartbeats have kept it listed as unmarked on a quorum of masters for a heartbeat
    // ttl, a period and a node timeout: by then every other agent's native verdict has seen it
    // or run out (native_until), and its native claims in flight have been answered.
    bool mark_readers = true;
  };
  // Called on this object's thread after each heartbeat.
  using LayoutFn = std::function<void(const Layout&)>;

  FleetPresence(PresenceSettings settings, ReportFn report, FleetStats* stats,
                LayoutFn layout = nullptr);
  ~FleetPresence();  // Stop()
  FleetPresence(const FleetPresence&) = delete;
  FleetPresence& operator=(const FleetPresence&) = delete;

  void Start();
  // Deregisters (bounded by the command timeout per master) and joins the thread. Idempotent.
  void Stop();

  // Any thread: heartbeats that reached at least one master; whether this agent is the reporter.
  uint64_t heartbeats() const { return heartbeats_.load(); }
  bool reporter() const { return reporter_.load(); }

 private:
  void Run();

  PresenceSettings settings_;
  ReportFn report_;
  LayoutFn layout_;
  FleetStats* stats_;
  std::atomic<uint64_t> heartbeats_{0};
  std::atomic<bool> reporter_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace lw::fleet
