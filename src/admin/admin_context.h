#pragma once
// AdminContext: what the admin handlers may read and call. Everything here is safe from the
// HTTP threads: the loop's published snapshots, the scanner's and the probe's latest reports,
// thread-safe metrics, and the loop's command queue behind `revoke`.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "admin/admin_stats.h"
#include "admin/views.h"
#include "config/config.h"
#include "core/defaults.h"
#include "fleet/reader.h"
#include "fleet/records.h"
#include "fleet/revoke.h"
#include "observe/metrics.h"
#include "observe/recent.h"
#include "observe/snapshot.h"
#include "scan/leak_scanner.h"
#include "scan/presence_probe.h"

namespace lw {

// What a force-release did, as the loop reports it.
struct RevokeOutcome {
  bool held = false;     // false: nobody held the resource through this agent
  uint64_t session = 0;  // the holder's session, and its peer credentials
  int pid = -1;
  int uid = -1;
  int deleted = 0;  // masters that deleted the key with the holder's token
  int masters = 0;
};
// Runs a force-release on the loop and waits for it; nullopt when the loop did not answer in
// time (or is shutting down).
using RevokeFn = std::function<std::optional<RevokeOutcome>(const std::string& resource,
                                                            std::chrono::milliseconds timeout)>;

struct AdminContext {
  Metrics* metrics = nullptr;         // the exposition of /metrics
  std::unique_ptr<AdminStats> stats;  // required: what the admin server counts
  const SnapshotBox* snapshots = nullptr;
  LeakScanner* scanner = nullptr;                      // null when the scanner is off
  EventLog* events = nullptr;                          // admin actions are added; null: none kept
  std::function<std::vector<HistoryPoint>()> history;  // null: no history
  PresenceProbe* presence = nullptr;                   // null: presence not checked
  AgentFacts agent;
  int64_t stuck_after_ms = kDefaultStuckAfterMs;
  std::vector<MasterAddress> masters;
  int64_t max_ttl_ms = kDefaultMaxTtlMs;  // bound of the TTL an operator may set on a leaked key
  RevokeFn revoke;                        // null: force-release unavailable
  // The fleet (docs/fleet.md): this agent as it announces itself, the reader of the fleet
  // view, and the revoke of a lock held through any agent (blocking, bounded by its wait).
  // Null reader / revoke: fleet presence is off (heartbeat_ttl_ms = 0).
  fleet::AgentRecord self;
  fleet::FleetReader* fleet = nullptr;
  // Takes the request's resource, hold or permit, and by; fills in the masters and the rest.
  std::function<fleet::RevokeResult(fleet::RevokeRequest)> fleet_revoke;
  std::string token;                      // empty: actions are disabled
  std::chrono::milliseconds stale_after{5000};  // snapshot age at which /healthz fails
  std::chrono::milliseconds action_timeout{2000};
  // The server's own bounds (admin_max_connections, admin_timeout_ms, admin_max_body_bytes):
  // connections served or waiting at once (one more gets 503), the deadline to receive a request
  // and to send its response, the largest request body (a larger one gets 413).
  int64_t max_connections = kDefaultAdminMaxConnections;
  std::chrono::milliseconds http_timeout{kDefaultAdminTimeoutMs};
  int64_t max_body_bytes = kDefaultAdminMaxBodyBytes;
};

}  // namespace lw
