#pragma once
// The socket's metrics, declared where they are counted (src/stats/stats.h): the transport
// (Server) counts connection-level refusals and backpressure, the service (LockService)
// counts requests, failures by op and code, and its own limit refusals. Loop thread for
// Received/Failed (their children are cached here, so the hot path neither builds a label
// map nor takes a family's mutex); any thread may read.

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/error_code.h"
#include "stats/stats.h"

namespace lw {

// The client limits, as labels of lockwarden_limit_refusals_total.
enum class Limit {
  kConnections,
  kLineLength,
  kInflight,
  kLocksPerSession,
  kWaitersPerResource,
  kIdleTimeout,
  kDetachedPerUid,  // one uid's detached leases, held and awaited (max_locks_per_session)
  kObservations,
  kCount
};
inline constexpr std::array<std::string_view, static_cast<size_t>(Limit::kCount)> kLimitNames = {
    "connections", "line_length", "inflight", "locks_per_session", "waiters_per_resource",
    "idle_timeout", "detached_per_uid", "observations_per_session"};

class RequestStats {
 public:
  explicit RequestStats(stats::Registry& r);

  // op: as on the wire, or "request" when the line named no known op.
  void Received(std::string_view op);
  void Failed(std::string_view op, ErrorCode code);

 private:
  stats::Registry& r_;

 public:
  stats::ByEnum<stats::Counter, Limit> limit_refusals{
      r_, "lockwarden_limit_refusals_total",
      "Requests or connections a client limit refused, by limit.", "limit", kLimitNames};
  stats::Counter access_denied{r_, "lockwarden_access_denied_total",
                               "Acquires refused because no access rule allows the peer."};
  stats::Gauge sessions_paused{r_, "lockwarden_sessions_paused",
                               "Sessions not read from until their unsent replies drain."};
  stats::Gauge detached_leases{r_, "lockwarden_detached_leases",
                               "Detached leases granted through this agent and still held: no "
                               "connection holds them; they end by release or by their ttl."};

 private:
  stats::Counter& RequestsOf(std::string_view op);

  std::map<std::string, stats::Counter, std::less<>> requests_;
  std::map<std::pair<std::string, ErrorCode>, stats::Counter> failures_;
};

// The help of lockwarden_failures_total, which the engine shares (op=lock reason=lost).
inline constexpr const char* kFailuresHelp =
    "Failed requests by op and error code; op=lock reason=lost counts lost locks.";

}  // namespace lw
