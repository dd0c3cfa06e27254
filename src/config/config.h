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
  // Fence counters (acquire with "fence": true) live at <fence_prefix><resource>, without TTL.
  // Neither prefix may start with the other, so a fence counter can never be a lock key.
  std::string fence_prefix = "fence:";
  // Masters that must confirm both phases of a fenced grant. 0 (auto): enough that fences keep
  // increasing while a majority of masters keep their data (4 of 5, 3 of 3; docs/safety.md).
  // Otherwise quorum..masters; the quorum itself assumes no master ever loses its data.
  int64_t fence_quorum = 0;
  // Restart quarantine: a master that started less than max_ttl_ms ago (or whose run_id changed)
  // does not count toward acquire/extend quorum until max_ttl_ms after its start. Turn off only
  // for masters that persist every write (appendonly yes + appendfsync always).
  bool restart_quarantine = true;
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

  // Admin HTTP listener (/metrics, /healthz, /readyz, /api/v1/*): "host:port", "[v6]:port", or
  // "off". Port 0 picks a free port (logged).
  std::string admin_listen = "127.0.0.1:9477";
  // File holding the bearer token that POST actions require; empty: actions are disabled.
  std::string admin_token_file;
  // The operator page flags a lock as stuck when it has been held longer than this, or when it
  // is not renewed and its ttl is longer than this (a hung holder keeps it that long).
  int64_t stuck_after_ms = 300'000;

  // Leak scanner: a pass over every master each interval (0: scanner off).
  int64_t scan_interval_ms = 60'000;
  int64_t scan_keys_per_second = 20'000;  // budget per pass, so a huge master is not hurt
  int64_t scan_batch = 500;               // SCAN COUNT and PTTL pipeline depth
  // Patterns scanned besides "<key_prefix>*" (always scanned), e.g. "*" to audit every key.
  std::vector<std::string> scan_patterns;
};

// "127.0.0.1:9477" / "[::1]:9477" / "localhost:9477" split into host and port.
struct ListenAddress {
  std::string host;
  int port = 0;
};
// Returns the address, nullopt for "off", or a human error.
std::variant<std::optional<ListenAddress>, std::string> ParseListenAddress(const std::string& text);

// One setting as seen by all three sources. `key` is the TOML key (snake_case); the env var
// is LOCKWARDEN_<KEY upper-cased>; the flag is --<key with '_' -> '-'>.
struct SettingInfo {
  std::string key;
  std::string help;  // one line, mentions the unit and the default
  bool repeatable = false;  // a list: the flag may be given several times
};
const std::vector<SettingInfo>& Settings();

std::string EnvVarFor(const std::string& key);  // "node_timeout_ms" -> "LOCKWARDEN_NODE_TIMEOUT_MS"
std::string FlagFor(const std::string& key);    // "node_timeout_ms" -> "--node-timeout-ms"

struct ConfigSources {
  std::optional<std::string> toml_path;        // --config / LOCKWARDEN_CONFIG
  std::map<std::string, std::string> env;      // the process environment (only LOCKWARDEN_* used)
  // key -> values from flags; several values only for lists (--master, --scan-pattern).
  std::map<std::string, std::vector<std::string>> flags;
};

// Builds and validates the configuration. Returns the config, or one message naming the
// setting, the source (file:line, env var or flag) and the reason.
std::variant<Config, std::string> LoadConfig(const ConfigSources& sources);

// Cross-field and range validation of a complete config; nullopt when it is sound.
std::optional<std::string> ValidateConfig(const Config& config);

}  // namespace lw
