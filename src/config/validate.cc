// Range and cross-field validation of a complete Config. Each check returns the first problem
// it finds, naming the setting at fault. LoadConfig relies on every message beginning with
// "<setting key>: " to add the source of that setting.

#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <string_view>

#include "config/config.h"
#include "core/access.h"
#include "fleet/records.h"
#include "core/redlock_math.h"

namespace lw {
namespace {

constexpr int64_t kSecondMs = 1'000;
constexpr int64_t kMinuteMs = 60 * kSecondMs;
constexpr int64_t kHourMs = 60 * kMinuteMs;
constexpr int64_t kDayMs = 24 * kHourMs;
constexpr int64_t kMiB = int64_t{1024} * 1024;
constexpr size_t kMaxKeyPrefixBytes = 64;

struct Problem {
  std::string key;
  std::string reason;
};
using Check = std::optional<Problem>;

// "604800000 ms (7 days)": the number the user typed, plus a readable size for large bounds.
std::string AmountText(int64_t value, const char* unit) {
  std::string text = std::to_string(value) + " " + unit;
  if (std::string_view(unit) == "ms" && value != 0) {
    if (value >= kDayMs && value % kDayMs == 0) {
      text += " (" + std::to_string(value / kDayMs) + (value == kDayMs ? " day)" : " days)");
    } else if (value >= kMinuteMs && value % kMinuteMs == 0) {
      text += " (" + std::to_string(value / kMinuteMs) + " min)";
    } else if (value >= kSecondMs && value % kSecondMs == 0) {
      text += " (" + std::to_string(value / kSecondMs) + " s)";
    }
  } else if (value >= kMiB && value % kMiB == 0) {
    text += " (" + std::to_string(value / kMiB) + " MiB)";
  }
  return text;
}

Check InRange(const char* key, int64_t value, int64_t lo, int64_t hi, const char* unit = "ms") {
  if (value >= lo && value <= hi) return std::nullopt;
  return Problem{key, "must be between " + AmountText(lo, unit) + " and " + AmountText(hi, unit) +
                          ", got " + std::to_string(value)};
}

Check CheckMasters(const Config& c) {
  if (c.masters.empty()) {
    return Problem{"masters",
                   "at least one Redis master is required; give one with "
                   "--master redis://127.0.0.1:6379 (or LOCKWARDEN_MASTERS, or masters = [...] "
                   "in the TOML file)"};
  }
  if (c.masters.size() > kMaxMasters) {
    return Problem{"masters", std::to_string(c.masters.size()) + " masters given; at most " +
                                  std::to_string(kMaxMasters) +
                                  " are supported (Redlock needs a majority of an odd few: 3, 5 "
                                  "or 7 is usual)"};
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < c.masters.size(); ++i) {
    const MasterAddress& m = c.masters[i];
    const std::string which = "master " + std::to_string(i + 1);
    if (m.host.empty()) return Problem{"masters", which + " has an empty host"};
    if (m.port < 1 || m.port > 65535) {
      return Problem{"masters", which + " has port " + std::to_string(m.port) + ", not 1..65535"};
    }
    std::string id = m.Display();
    std::transform(id.begin(), id.end(), id.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (!seen.insert(id).second) {
      return Problem{"masters", m.Display() +
                                    " is listed twice; each master must be a distinct Redis "
                                    "server or one server would cast two votes"};
    }
  }
  return std::nullopt;
}

Check CheckSocketPath(const Config& c) {
  constexpr size_t kSunPath = sizeof(sockaddr_un{}.sun_path);  // 108 on Linux, NUL included
  const std::string& path = c.socket_path;
  if (path.empty()) return Problem{"socket_path", "must not be empty"};
  if (path.front() != '/') return Problem{"socket_path", "must be an absolute path"};
  if (path.find('\0') != std::string::npos) {
    return Problem{"socket_path", "must not contain a NUL byte"};
  }
  if (path.size() >= kSunPath) {
    return Problem{"socket_path", "is " + std::to_string(path.size()) +
                                      " bytes; a Unix socket path must be shorter than " +
                                      std::to_string(kSunPath) + " bytes"};
  }
  return std::nullopt;
}

Check CheckPrefix(const char* key, const std::string& prefix) {
  if (prefix.empty()) return Problem{key, "must not be empty"};
  if (prefix.size() > kMaxKeyPrefixBytes) {
    return Problem{key, "is " + std::to_string(prefix.size()) + " bytes; at most " +
                            std::to_string(kMaxKeyPrefixBytes) + " are allowed"};
  }
  for (unsigned char ch : prefix) {
    if (ch <= 0x20 || ch == 0x7f) {
      return Problem{key, "must not contain whitespace or control characters"};
    }
  }
  return std::nullopt;
}

Check CheckKeyPrefix(const Config& c) {
  if (auto p = CheckPrefix("key_prefix", c.key_prefix)) return p;
  if (auto p = CheckPrefix("fence_prefix", c.fence_prefix)) return p;
  for (const auto& [key, prefix] : {std::pair{"key_prefix", &c.key_prefix},
                                    std::pair{"fence_prefix", &c.fence_prefix}}) {
    if (prefix->starts_with(fleet::kNamespace) || fleet::kNamespace.starts_with(*prefix)) {
      return Problem{key, "\"" + *prefix + "\" overlaps \"" + std::string(fleet::kNamespace) +
                              "\", where the fleet registry lives: fleet keys would be taken "
                              "for locks; choose another prefix"};
    }
  }
  if (c.fence_prefix.starts_with(c.key_prefix) || c.key_prefix.starts_with(c.fence_prefix)) {
    return Problem{"fence_prefix", "\"" + c.fence_prefix + "\" and key_prefix \"" + c.key_prefix +
                                       "\" must not start with one another, or a fence counter "
                                       "could be a lock key"};
  }
  const int64_t n = static_cast<int64_t>(c.masters.size());
  if (c.fence_quorum != 0 && !c.masters.empty() &&
      (c.fence_quorum < QuorumSize(static_cast<int>(n)) || c.fence_quorum > n)) {
    return Problem{"fence_quorum", "is " + std::to_string(c.fence_quorum) + "; give 0 (auto) or " +
                                       std::to_string(QuorumSize(static_cast<int>(n))) + ".." +
                                       std::to_string(n) + " for " + std::to_string(n) +
                                       " masters"};
  }
  return std::nullopt;
}

Check CheckTtls(const Config& c) {
  constexpr int64_t kMaxTtl = 7 * kDayMs;
  if (auto p = InRange("min_ttl_ms", c.min_ttl_ms, 1, kMaxTtl)) return p;
  if (auto p = InRange("max_ttl_ms", c.max_ttl_ms, 1, kMaxTtl)) return p;
  if (auto p = InRange("default_ttl_ms", c.default_ttl_ms, 1, kMaxTtl)) return p;
  if (c.min_ttl_ms > c.max_ttl_ms) {
    return Problem{"min_ttl_ms", "is " + std::to_string(c.min_ttl_ms) + ", above max_ttl_ms (" +
                                     std::to_string(c.max_ttl_ms) + ")"};
  }
  if (c.default_ttl_ms < c.min_ttl_ms || c.default_ttl_ms > c.max_ttl_ms) {
    return Problem{"default_ttl_ms",
                   "is " + std::to_string(c.default_ttl_ms) + ", outside min_ttl_ms..max_ttl_ms (" +
                       std::to_string(c.min_ttl_ms) + ".." + std::to_string(c.max_ttl_ms) + ")"};
  }
  return std::nullopt;
}

Check CheckTimeouts(const Config& c) {
  if (auto p = InRange("max_wait_ms", c.max_wait_ms, 0, kDayMs)) return p;
  if (auto p = InRange("node_timeout_ms", c.node_timeout_ms, 1, 10'000)) return p;
  // An acquire round may take up to node_timeout_ms, all of it eaten from the shortest ttl.
  // The default (50 ms against a 100 ms min ttl) sits exactly at half, which is allowed.
  if (c.node_timeout_ms * 2 > c.min_ttl_ms) {
    return Problem{"node_timeout_ms",
                   "is " + std::to_string(c.node_timeout_ms) + " but must be at most half of " +
                       "min_ttl_ms (" + std::to_string(c.min_ttl_ms) +
                       "): a node timeout close to the ttl leaves a lock no validity by the time "
                       "the masters have answered"};
  }
  return InRange("connect_timeout_ms", c.connect_timeout_ms, 1, 60'000);
}

Check CheckDrift(const Config& c) {
  if (!std::isfinite(c.drift_factor) || c.drift_factor < 0 || c.drift_factor >= 0.5) {
    char shown[32];
    const auto end = std::to_chars(shown, shown + sizeof shown, c.drift_factor).ptr;
    return Problem{"drift_factor",
                   "must be a number in [0, 0.5), e.g. 0.01; got " + std::string(shown, end)};
  }
  return std::nullopt;
}

Check CheckBackgroundTiming(const Config& c) {
  if (auto p = InRange("retry_delay_ms", c.retry_delay_ms, 0, 60'000)) return p;
  if (auto p = InRange("retry_jitter_ms", c.retry_jitter_ms, 0, 60'000)) return p;
  if (auto p = InRange("reconnect_max_backoff_ms", c.reconnect_max_backoff_ms, 10, 600'000)) {
    return p;
  }
  if (auto p = InRange("health_interval_ms", c.health_interval_ms, 10, 60'000)) return p;
  if (auto p = InRange("election_poll_ms", c.election_poll_ms, 10, 60'000)) return p;
  return InRange("shutdown_grace_ms", c.shutdown_grace_ms, 0, 60'000);
}

Check CheckLogLevelAndLines(const Config& c) {
  static const std::set<std::string> levels = {"trace", "debug",    "info", "warn",
                                               "error", "critical", "off"};
  if (!levels.contains(c.log_level)) {
    return Problem{"log_level", "\"" + c.log_level +
                                    "\" is not one of trace, debug, info, warn, error, "
                                    "critical, off"};
  }
  return InRange("max_line_bytes", c.max_line_bytes, 1024, 16 * kMiB, "bytes");
}

Check CheckClientLimits(const Config& c) {
  if (auto p = InRange("max_connections", c.max_connections, 1, 1'000'000, "connections")) {
    return p;
  }
  if (auto p = InRange("max_inflight_per_session", c.max_inflight_per_session, 1, 100'000,
                       "requests")) {
    return p;
  }
  if (auto p = InRange("max_locks_per_session", c.max_locks_per_session, 1, 1'000'000, "locks")) {
    return p;
  }
  if (auto p = InRange("max_waiters_per_resource", c.max_waiters_per_resource, 1, 1'000'000,
                       "waiters")) {
    return p;
  }
  if (auto p = InRange("max_observations_per_session", c.max_observations_per_session, 1,
                       100'000, "elections")) {
    return p;
  }
  if (c.idle_timeout_ms != 0) {
    if (auto p = InRange("idle_timeout_ms", c.idle_timeout_ms, 1000, 7 * kDayMs)) return p;
  }
  return InRange("max_unsent_bytes", c.max_unsent_bytes, 64 * 1024, 1024 * kMiB, "bytes");
}

// A user or group as a name or a number; resolved when the agent starts.
Check CheckPrincipal(const char* key, const std::string& value) {
  for (unsigned char ch : value) {
    if (ch <= 0x20 || ch >= 0x7f || ch == ':') {
      return Problem{key, "\"" + value + "\" is not a user/group name or number"};
    }
  }
  return std::nullopt;
}

Check CheckSocketAccess(const Config& c) {
  const std::string& mode = c.socket_mode;
  int64_t bits = -1;
  if (mode.size() >= 3 && mode.size() <= 4 &&
      mode.find_first_not_of("01234567") == std::string::npos) {
    std::from_chars(mode.data(), mode.data() + mode.size(), bits, 8);
  }
  if (bits < 0 || bits > 0777) {
    return Problem{"socket_mode", "\"" + mode + "\" is not an octal mode such as 0660"};
  }
  if ((bits & 0600) != 0600) {
    return Problem{"socket_mode", mode + " does not let the owner read and write the socket"};
  }
  if (auto p = CheckPrincipal("socket_owner", c.socket_owner)) return p;
  if (auto p = CheckPrincipal("socket_group", c.socket_group)) return p;
  for (size_t i = 0; i < c.access.size(); ++i) {
    auto parsed = ParseAccessRule(c.access[i]);
    if (auto* error = std::get_if<std::string>(&parsed)) {
      return Problem{"access", "rule " + std::to_string(i + 1) + " (\"" + c.access[i] +
                                   "\"): " + *error};
    }
  }
  return std::nullopt;
}

Check CheckCredentials(const Config& c) {
  for (unsigned char ch : c.redis_user) {
    if (ch <= 0x20 || ch >= 0x7f) {
      return Problem{"redis_user", "\"" + c.redis_user +
                                       "\" is not a usable ACL user name (no blanks, control or "
                                       "non-ASCII characters)"};
    }
  }
  if (!c.redis_password_file.empty() && c.redis_password_file.front() != '/') {
    return Problem{"redis_password_file", "must be an absolute path"};
  }
  if (!c.redis_password_file.empty() && !c.redis_password.empty()) {
    return Problem{"redis_password_file", "and redis_password are both set; give one"};
  }
  if (c.redis_password.find_first_of("\r\n") != std::string::npos) {
    return Problem{"redis_password", "must not contain a line break"};
  }
  return std::nullopt;
}

Check CheckTls(const Config& c) {
  const std::pair<const char*, const std::string*> files[] = {
      {"redis_tls_ca_file", &c.redis_tls_ca_file},
      {"redis_tls_cert_file", &c.redis_tls_cert_file},
      {"redis_tls_key_file", &c.redis_tls_key_file}};
  for (const auto& [key, path] : files) {
    if (!path->empty() && path->front() != '/') return Problem{key, "must be an absolute path"};
  }
  if (c.redis_tls_cert_file.empty() != c.redis_tls_key_file.empty()) {
    return Problem{c.redis_tls_cert_file.empty() ? "redis_tls_key_file" : "redis_tls_cert_file",
                   "a client certificate needs both redis_tls_cert_file and redis_tls_key_file"};
  }
  for (char ch : c.redis_tls_server_name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.' && ch != ':') {
      return Problem{"redis_tls_server_name", "\"" + c.redis_tls_server_name +
                                                  "\" is not a host name or address"};
    }
  }
  const bool tls_set = !c.redis_tls_ca_file.empty() || !c.redis_tls_cert_file.empty() ||
                       !c.redis_tls_server_name.empty() || c.redis_tls_insecure_skip_verify;
  const bool any_tls = std::any_of(c.masters.begin(), c.masters.end(),
                                   [](const MasterAddress& m) { return m.tls.enabled; });
  if (tls_set && !any_tls && !c.masters.empty()) {
    // Most likely redis:// was written where rediss:// was meant: say so rather than talk
    // plain text to masters the operator believes are reached over TLS.
    return Problem{"masters", "TLS settings (redis_tls_*) are set but no master URL is "
                              "rediss://; use rediss://host:port for TLS masters"};
  }
  return std::nullopt;
}

Check CheckAdmin(const Config& c) {
  auto parsed = ParseListenAddress(c.admin_listen);
  if (auto* error = std::get_if<std::string>(&parsed)) return Problem{"admin_listen", *error};
  if (!c.admin_token_file.empty() && c.admin_token_file.front() != '/') {
    return Problem{"admin_token_file", "must be an absolute path"};
  }
  const auto& listen = std::get<std::optional<ListenAddress>>(parsed);
  if (listen && !IsLoopbackHost(listen->host) && c.admin_token_file.empty()) {
    return Problem{"admin_listen",
                   c.admin_listen + " is reachable beyond this host, where everything but "
                                    "/healthz, /readyz and the page's static files needs the "
                                    "admin token; set admin_token_file too (or listen on "
                                    "127.0.0.1)"};
  }
  if (auto p = InRange("stuck_after_ms", c.stuck_after_ms, 1000, 7 * kDayMs)) return p;
  if (auto p = InRange("admin_max_connections", c.admin_max_connections, 1, 10'000,
                       "connections")) {
    return p;
  }
  if (auto p = InRange("admin_timeout_ms", c.admin_timeout_ms, 100, 600'000)) return p;
  return InRange("admin_max_body_bytes", c.admin_max_body_bytes, 1024, 16 * kMiB, "bytes");
}

Check CheckScanner(const Config& c) {
  if (c.scan_interval_ms != 0) {
    if (auto p = InRange("scan_interval_ms", c.scan_interval_ms, 100, kDayMs)) return p;
  }
  if (auto p = InRange("scan_keys_per_second", c.scan_keys_per_second, 10, 10'000'000, "keys/s")) {
    return p;
  }
  if (auto p = InRange("scan_batch", c.scan_batch, 1, 100'000, "keys")) return p;
  for (const std::string& pattern : c.scan_patterns) {
    if (pattern.empty()) return Problem{"scan_patterns", "an entry is empty"};
    if (pattern.size() > 1024) return Problem{"scan_patterns", "an entry is over 1024 bytes"};
  }
  return std::nullopt;
}

Check CheckFleet(const Config& c) {
  for (unsigned char ch : c.agent_name) {
    if (ch < 0x20 || ch == 0x7f) {
      return Problem{"agent_name", "must not contain control characters"};
    }
  }
  if (c.agent_name.size() > 128) {
    return Problem{"agent_name", "is " + std::to_string(c.agent_name.size()) +
                                     " bytes; at most 128 are allowed"};
  }
  if (c.heartbeat_ttl_ms != 0) {
    if (auto p = InRange("heartbeat_ttl_ms", c.heartbeat_ttl_ms, 3'000, 300'000)) {
      p->reason += " (or 0: no fleet presence)";
      return p;
    }
  } else if (!c.mark_readers) {
    // The fleet learns from the registry that an agent leaves its readers unmarked; unlisted,
    // it would keep marking them (docs/safety.md §7).
    return Problem{"mark_readers",
                   "is false, which needs fleet presence (heartbeat_ttl_ms above 0): the other "
                   "agents learn from the fleet registry that this one leaves read holds "
                   "unmarked"};
  }
  if (auto p = InRange("fleet_refresh_ms", c.fleet_refresh_ms, 1'000, kHourMs)) return p;
  if (auto p = InRange("fleet_read_budget", c.fleet_read_budget, 1'000, 1'000'000'000, "keys")) {
    return p;
  }
  if (!c.admin_url.empty() && !c.admin_url.starts_with("http://") &&
      !c.admin_url.starts_with("https://")) {
    return Problem{"admin_url", "\"" + c.admin_url + "\" is not an http:// or https:// URL"};
  }
  return std::nullopt;
}

Check FindProblem(const Config& c) {
  for (auto check : {CheckMasters, CheckSocketPath, CheckKeyPrefix, CheckTtls, CheckTimeouts,
                     CheckDrift, CheckBackgroundTiming, CheckLogLevelAndLines, CheckClientLimits,
                     CheckSocketAccess, CheckCredentials, CheckTls, CheckAdmin, CheckScanner, CheckFleet}) {
    if (auto problem = check(c)) return problem;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> ValidateConfig(const Config& config) {
  if (auto problem = FindProblem(config)) return problem->key + ": " + problem->reason;
  return std::nullopt;
}

}  // namespace lw
