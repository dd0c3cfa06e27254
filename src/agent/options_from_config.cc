#include "agent/options_from_config.h"

#include <chrono>
#include <utility>

namespace lw {

NodeClientOptions NodeClientOptionsFrom(const Config& cfg) {
  NodeClientOptions o;
  o.connect_timeout_ms = cfg.connect_timeout_ms;
  o.reconnect_max_backoff_ms = cfg.reconnect_max_backoff_ms;
  o.health_interval_ms = cfg.health_interval_ms;
  o.max_ttl_ms = cfg.max_ttl_ms;
  o.restart_quarantine = cfg.restart_quarantine;
  return o;
}

SubscriberOptions SubscriberOptionsFrom(const Config& cfg) {
  SubscriberOptions o;
  o.connect_timeout_ms = cfg.connect_timeout_ms;
  o.reconnect_max_backoff_ms = cfg.reconnect_max_backoff_ms;
  return o;
}

EngineOptions EngineOptionsFrom(const Config& cfg) {
  EngineOptions o;
  o.key_prefix = cfg.key_prefix;
  o.fence_prefix = cfg.fence_prefix;
  o.fence_quorum = static_cast<int>(cfg.fence_quorum);
  o.drift_factor = cfg.drift_factor;
  o.node_timeout_ms = cfg.node_timeout_ms;
  o.retry_delay_ms = cfg.retry_delay_ms;
  o.retry_jitter_ms = cfg.retry_jitter_ms;
  o.local_first = cfg.local_first;
  // Marking from the start, whatever the setting: an agent that does not mark stops only once
  // the fleet has seen it so (fleet::FleetPresence::Layout::mark_readers).
  o.mark_readers = true;
  o.max_waiters_per_resource = static_cast<size_t>(cfg.max_waiters_per_resource);
  o.stuck_after_ms = cfg.stuck_after_ms;
  return o;
}

ElectionOptions ElectionOptionsFrom(const Config& cfg) {
  ElectionOptions o;
  o.key_prefix = cfg.key_prefix;
  o.node_timeout_ms = cfg.node_timeout_ms;
  o.poll_ms = cfg.election_poll_ms;
  o.max_observed_per_session = static_cast<size_t>(cfg.max_observations_per_session);
  return o;
}

ServiceOptions ServiceOptionsFrom(const Config& cfg, AccessPolicy access) {
  ServiceOptions o;
  o.limits = {cfg.min_ttl_ms, cfg.max_ttl_ms, cfg.default_ttl_ms, cfg.max_wait_ms};
  o.max_inflight = static_cast<size_t>(cfg.max_inflight_per_session);
  o.max_locks = static_cast<size_t>(cfg.max_locks_per_session);
  o.access = std::move(access);
  return o;
}

ServerOptions ServerOptionsFrom(const Config& cfg, const SocketAccess& socket) {
  ServerOptions o;
  o.socket_path = cfg.socket_path;
  o.limits = {static_cast<size_t>(cfg.max_connections), cfg.idle_timeout_ms,
              static_cast<size_t>(cfg.max_unsent_bytes), static_cast<size_t>(cfg.max_line_bytes)};
  o.socket_access = socket;
  return o;
}

AdminContext AdminContextFrom(const Config& cfg) {
  AdminContext o;
  o.masters = cfg.masters;
  o.max_ttl_ms = cfg.max_ttl_ms;
  o.stuck_after_ms = cfg.stuck_after_ms;
  o.max_connections = cfg.admin_max_connections;
  o.http_timeout = std::chrono::milliseconds(cfg.admin_timeout_ms);
  o.max_body_bytes = cfg.admin_max_body_bytes;
  return o;
}

ScanSettings ScanSettingsFrom(const Config& cfg) {
  ScanSettings o;
  o.masters = cfg.masters;
  o.key_prefix = cfg.key_prefix;
  o.fence_prefix = cfg.fence_prefix;
  o.extra_patterns = cfg.scan_patterns;
  o.max_ttl_ms = cfg.max_ttl_ms;
  o.batch = cfg.scan_batch;
  o.keys_per_second = cfg.scan_keys_per_second;
  o.connect_timeout = std::chrono::milliseconds(cfg.connect_timeout_ms);
  return o;
}

namespace fleet {

SafetySettings SafetySettingsFrom(const Config& cfg) {
  SafetySettings o;
  o.key_prefix = cfg.key_prefix;
  o.max_ttl_ms = cfg.max_ttl_ms;
  o.drift_factor = cfg.drift_factor;
  o.restart_quarantine = cfg.restart_quarantine;
  o.fence_prefix = cfg.fence_prefix;
  o.fence_quorum = cfg.fence_quorum;
  return o;
}

ReaderSettings ReaderSettingsFrom(const Config& cfg) {
  ReaderSettings o;
  o.masters = cfg.masters;
  o.key_prefix = cfg.key_prefix;
  o.stuck_after_ms = cfg.stuck_after_ms;
  o.refresh = std::chrono::milliseconds(cfg.fleet_refresh_ms);
  o.batch = cfg.scan_batch;
  o.keys_per_second = cfg.scan_keys_per_second;
  o.read_budget = cfg.fleet_read_budget;
  o.connect_timeout = std::chrono::milliseconds(cfg.connect_timeout_ms);
  return o;
}

PresenceSettings PresenceSettingsFrom(const Config& cfg) {
  PresenceSettings o;
  o.masters = cfg.masters;
  o.heartbeat_ttl = std::chrono::milliseconds(cfg.heartbeat_ttl_ms);
  o.connect_timeout = std::chrono::milliseconds(cfg.connect_timeout_ms);
  o.node_timeout = std::chrono::milliseconds(cfg.node_timeout_ms);
  return o;
}

}  // namespace fleet
}  // namespace lw
