#pragma once
// NodeStats: the metrics of one master connection, declared where they are counted (see
// stats/stats.h). NodeClient bumps them directly; docs/metrics.md describes each family.
// One NodeStats per master, all on one registry: the families are shared, each NodeStats adds
// its master's children.

#include <array>
#include <string>
#include <string_view>

#include "redis/connect_policy.h"
#include "stats/stats.h"

namespace lw {

// Commands sent to a master (the `command` label of lockwarden_master_requests_total).
// The kind scripts (redis/kind_scripts.h) follow in scripts::KindScript order.
enum class NodeCommand { kDeleteIfHeld, kExtendIfHeld, kPing, kRaiseFence, kClaimExclusive,
                         kClaimShared, kClaimPermit, kExtendShared, kExtendPermit, kReleaseShared,
                         kReleasePart, kFenceRecord, kReadRecord, kReleaseTurn, kLeaveQueue,
                         kQueueHead, kTakeLease, kSetIfAbsent, kCount };
// Errors by kind. kTimeout is the engine's (its per-command deadline passed without this
// master's answer); the engine counts it on the same family.
enum class NodeError { kErrorReply, kUnavailable, kDisconnected, kConnectFailed, kStalled, kTimeout,
                       kCount };

inline constexpr std::array<std::string_view, 18> kNodeCommandNames = {
    "delete_if_held", "extend_if_held", "ping",          "raise_fence",    "claim_exclusive",
    "claim_shared",   "claim_permit",   "extend_shared", "extend_permit",  "release_shared",
    "release_part",   "fence_record",   "read_record",   "release_turn",   "leave_queue",
    "queue_head",     "take_lease",    "set_nx"};
inline constexpr std::array<std::string_view, 6> kNodeErrorNames = {
    "error_reply", "unavailable", "disconnected", "connect_failed", "stalled", "timeout"};

struct NodeStats {
  // master: "host:port" (MasterAddress::Display()), the `master` label of every child.
  NodeStats(stats::Registry& r, const std::string& master) : r_(r), m_{{"master", master}} {}

  // 100 us .. 10 s (node_timeout_ms's maximum) at 8 per octave, as the lock waits
  // (locking/engine_stats.cc). By master only: by command as well it would be 13 times the
  // series; the per-command rate is `requests`.
  static inline const stats::Buckets kLatencyBuckets = stats::ExponentialBuckets(0.0001, 8, 10);

  stats::Registry& r_;
  const stats::Labels m_;
  stats::Gauge up{r_, "lockwarden_master_up", "1 while the connection to the master is up and handshaken.", m_};
  stats::Gauge quarantined{r_, "lockwarden_master_quarantined", "1 while the master is in restart quarantine: it started less than max_ttl ago, so its votes do not count toward quorum.", m_};
  stats::Histogram latency{r_, "lockwarden_master_request_duration_seconds", "Round trip of commands a master answered.", kLatencyBuckets, m_};
  stats::ByEnum<stats::Counter, NodeCommand> requests{r_, "lockwarden_master_requests_total", "Commands a master answered (an error reply included), by command.", "command", kNodeCommandNames, m_};
  stats::ByEnum<stats::Counter, NodeError> errors{r_, "lockwarden_master_errors_total", "Master errors by kind.", "kind", kNodeErrorNames, m_};
  stats::Counter reconnects{r_, "lockwarden_master_reconnects_total", "Successful connections to a master after the first.", m_};
  stats::ByEnum<stats::Counter, ConnectFailure> connect_failures{r_, "lockwarden_master_connect_failures_total", "Failed attempts to connect to a master, by reason (TLS certificate problems included).", "reason", kConnectFailureNames, m_};
};

}  // namespace lw
