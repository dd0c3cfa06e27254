#pragma once
// Agent configuration: defaults < TOML file < LOCKWARDEN_* environment < command-line flags.
// Every setting is validated; a bad one yields a message naming the setting and why.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/defaults.h"
#include "core/master_address.h"

namespace lw {

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
  int64_t min_ttl_ms = kDefaultMinTtlMs;
  int64_t max_ttl_ms = kDefaultMaxTtlMs;  // also the length of restart quarantine
  int64_t default_ttl_ms = kDefaultTtlMs;
  int64_t max_wait_ms = kDefaultMaxWaitMs;
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

  // Client limits (docs/security.md). Each refusal is a `too_many` error and a count in
  // lockwarden_limit_refusals_total{limit}.
  int64_t max_connections = 1'024;         // sessions at once; more are accepted and closed
  int64_t max_inflight_per_session = 128;  // requests of one session not yet answered
  int64_t max_locks_per_session = 1'024;   // locks one session holds at once
  int64_t max_waiters_per_resource = 1'024;  // queued acquires of one resource on this agent
  // A session with no lock, no request in flight and no byte received for this long is
  // closed (0: never).
  int64_t idle_timeout_ms = 300'000;
  // A session whose unsent replies exceed this is not read from until they drain (a slow or
  // stalled reader cannot make the agent buffer without end).
  int64_t max_unsent_bytes = 1'048'576;

  // The Unix socket's permissions: mode (octal text), and owner/group (name or number; empty:
  // the agent's own). The directory is created 0750 with the same owner and group.
  std::string socket_mode = "0660";
  std::string socket_owner;
  std::string socket_group;
  // Who may lock what: "<who> <prefix> [<prefix>...]" with who = uid:N, gid:N, user:NAME,
  // group:NAME or any, and "*" for every resource. Empty: any peer that can open the socket
  // may lock anything. Otherwise an acquire is allowed when some rule matches both the peer
  // (its uid, primary gid or a supplementary group) and a prefix of the resource.
  std::vector<std::string> access;

  // Credentials for masters whose URL has none: an ACL user (empty: AUTH with the password
  // only), and a password from a file (first line) or LOCKWARDEN_REDIS_PASSWORD. The password is
  // never logged; a flag for it is refused (command lines are visible to every user).
  std::string redis_user;
  std::string redis_password_file;
  std::string redis_password;

  // Admin HTTP listener (/metrics, /healthz, /readyz, /api/v1/*): "host:port", "[v6]:port", or
  // "off". Port 0 picks a free port (logged).
  std::string admin_listen = "127.0.0.1:9477";
  // File holding the bearer token that POST actions require; empty: actions are disabled.
  std::string admin_token_file;
  // The operator page flags a lock as stuck when it has been held longer than this, or when it
  // is not renewed and its ttl is longer than this (a hung holder keeps it that long).
  int64_t stuck_after_ms = 300'000;
  // The admin HTTP server's own bounds: connections at once (more get 503 and are closed), a
  // deadline for receiving each request and sending its response (a slow drip is cut off), and
  // the largest request body.
  int64_t admin_max_connections = 32;
  int64_t admin_timeout_ms = 5'000;
  int64_t admin_max_body_bytes = 65'536;

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
// True for hosts only this machine can reach: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackHost(const std::string& host);

// One setting as seen by all three sources. `key` is the TOML key (snake_case); the env var
// is LOCKWARDEN_<KEY upper-cased>; the flag is --<key with '_' -> '-'>.
struct SettingInfo {
  std::string key;
  std::string help;  // one line, mentions the unit and the default
  bool repeatable = false;  // a list: the flag may be given several times
  bool used_by_scan = false;  // `lockwarden scan` reads it (serve reads every setting)
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
