#pragma once
// FleetStats: what the fleet room counts (see stats/stats.h for the pattern).
//
// Two kinds of series, so that a fact is exported once however many agents there are
// (docs/observability.md, "Counting once"):
// - per agent, on the agent's registry (`own`): its heartbeats, the fleet reads it made and
//   their cost, whether it is the reporter. Summing them over agents is meaningful.
// - fleet totals (`totals`), on a registry of their own that the agent's /metrics includes only
//   while this agent is the reporter (Metrics::AddConditional). Every other agent exports none
//   of them, so `max`/`sum` over the fleet never counts a fact twice. No resource names as
//   labels anywhere: the fleet table is the place for names.

#include <memory>
#include <string>

#include "stats/stats.h"

namespace lw::fleet {

struct FleetOwnStats {
  explicit FleetOwnStats(stats::Registry& r) : r_(r) {}
  stats::Registry& r_;
  stats::Counter heartbeats{r_, "lockwarden_fleet_heartbeats_total", "Heartbeats written to at least one master."};
  stats::Counter heartbeat_errors{r_, "lockwarden_fleet_heartbeat_errors_total", "Heartbeat writes to a master that failed."};
  stats::Counter reads{r_, "lockwarden_fleet_reads_total", "Fleet table reads made by this agent."};
  stats::Counter read_errors{r_, "lockwarden_fleet_read_errors_total", "Fleet table reads of a master that failed."};
  stats::Gauge read_duration{r_, "lockwarden_fleet_read_duration_seconds", "Duration of this agent's last fleet table read."};
  stats::Gauge reporter{r_, "lockwarden_fleet_reporter", "1 while this agent exports the fleet totals (holds the reporter key on a quorum)."};
};

struct FleetTotals {
  explicit FleetTotals(stats::Registry& r) : r_(r) {}
  stats::Registry& r_;
  stats::Gauge agents{r_, "lockwarden_fleet_agents", "Agents in the fleet registry."};
  stats::Gauge agents_drifted{r_, "lockwarden_fleet_agents_settings_drift", "Agents whose safety settings differ from the fleet's."};
  stats::Gauge locks{r_, "lockwarden_fleet_locks", "Lock keys held on a quorum of masters."};
  stats::Gauge locks_orphaned{r_, "lockwarden_fleet_locks_holder_gone", "Locks whose holder agent is not in the registry."};
  stats::Gauge locks_stuck{r_, "lockwarden_fleet_locks_stuck", "Locks that are stuck by the stuck_after rule."};
  stats::Gauge oldest_stuck{r_, "lockwarden_fleet_oldest_stuck_lock_seconds", "How long the fleet's longest-held stuck lock has been held (0: none stuck)."};
  stats::Gauge waiters{r_, "lockwarden_fleet_waiters", "Acquires queued across the fleet."};
  stats::Gauge deadlocks{r_, "lockwarden_fleet_deadlocks", "Deadlocks in the fleet: sets of processes each waiting for a lock another of them holds (cycles of the wait-for graph)."};
  stats::Gauge deadlock_oldest_wait{r_, "lockwarden_fleet_deadlock_oldest_wait_seconds", "The longest wait in any deadlock's cycle (0: no deadlock)."};
  stats::Gauge read_timestamp{r_, "lockwarden_fleet_read_timestamp_seconds", "Unix time of the fleet read these totals come from."};
};

struct FleetStats {
  explicit FleetStats(stats::Registry& own_registry)
      : own(own_registry), totals_registry(std::make_shared<stats::Registry>()),
        totals(*totals_registry) {}
  FleetOwnStats own;
  std::shared_ptr<stats::Registry> totals_registry;  // exported only while reporter
  FleetTotals totals;
};

}  // namespace lw::fleet
