#pragma once
// Agent configuration: defaults < TOML file < LOCKWARDEN_* environment < command-line flags.
// Every setting is validated; a bad one yields a message naming the setting and why.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace lw {

struct MasterAddress {
  std::string host;
  int port = 6379;
  std::string user;      // empty: no ACL user (AUTH password only, if password set)
  std::string password;  // empty: no AUTH. Never logged.
  // "host:port" — safe to log and show (no credentials).
  std::string Display() const;
};

// Parses "redis://[user:password@]host:port" (port defaults to 6379; "user:" may be
// omitted as in redis://:secret@host:6379). Returns the address or a human error.
std::variant<MasterAddress, std::string> ParseMasterUrl(const std::string& url);

struct Config {
  std::string socket_path = "/run/lockwarden/lockwarden.sock";
  std::vector<MasterAddress> masters;
  std::string key_prefix = "lock:";
  int64_t min_ttl_ms = 100;
  int64_t max_ttl_ms = 3'600'000;
  int64_t default_ttl_ms = 30'000;
  int64_t max_wait_ms = 300'000;
  int64_t node_timeout_ms = 50;
  int64_t connect_timeout_ms = 1'000;
  double drift_factor = 0.01;
  int64_t retry_delay_ms = 50;
  int64_t retry_jitter_ms = 50;
  int64_t reconnect_max_backoff_ms = 2'000;
  int64_t health_interval_ms = 1'000;
  int64_t shutdown_grace_ms = 2'000;  // how long SIGTERM waits for releases to be answered
  std::string log_level = "info";     // trace, debug, info, warn, error, critical, off
  int64_t max_line_bytes = 65'536;
};

// One setting as seen by all three sources. `key` is the TOML key (snake_case); the env var
// is LOCKWARDEN_<KEY upper-cased>; the flag is --<key with '_' -> '-'>.
struct SettingInfo {
  std::string key;
  std::string help;  // one line, mentions the unit and the default
};
const std::vector<SettingInfo>& Settings();

std::string EnvVarFor(const std::string& key);  // "node_timeout_ms" -> "LOCKWARDEN_NODE_TIMEOUT_MS"
std::string FlagFor(const std::string& key);    // "node_timeout_ms" -> "--node-timeout-ms"

struct ConfigSources {
  std::optional<std::string> toml_path;        // --config / LOCKWARDEN_CONFIG
  std::map<std::string, std::string> env;      // the process environment (only LOCKWARDEN_* used)
  // key -> values from flags; several values only for "masters" (--master is repeatable).
  std::map<std::string, std::vector<std::string>> flags;
};

// Builds and validates the configuration. Returns the config, or one message naming the
// setting, the source (file:line, env var or flag) and the reason.
std::variant<Config, std::string> LoadConfig(const ConfigSources& sources);

// Cross-field and range validation of a complete config; nullopt when it is sound.
std::optional<std::string> ValidateConfig(const Config& config);

}  // namespace lw
