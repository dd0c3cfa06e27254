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

// Every setting, with its default: one member per row of config/settings.def, in its order.
struct Config {
#define LW_SETTING(key, type, default_value, unit, meaning, reach) type key = default_value;
#include "config/settings.def"
#undef LW_SETTING
};

// "127.0.0.1:9477" / "[::1]:9477" / "localhost:9477" split into host and port.
struct ListenAddress {
  std::string host;
  int port = 0;
};
// Returns the address, nullopt for "off", or a human error.
std::variant<std::optional<ListenAddress>, std::string> ParseListenAddress(const std::string& text);
// "http://host:port" as a client on this machine reaches the listener: a wildcard host on
// loopback (0.0.0.0 -> 127.0.0.1, :: -> [::1]), an IPv6 host in brackets.
std::string LocalUrl(const ListenAddress& address);
// True for hosts only this machine can reach: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackHost(const std::string& host);

// One setting as seen by all three sources. `key` is the TOML key (snake_case); the env var
// is LOCKWARDEN_<KEY upper-cased>; the flag is --<key with '_' -> '-'>.
struct SettingInfo {
  std::string key;
  std::string help;           // one line, mentions the unit and the default
  bool repeatable = false;    // a list: the flag may be given several times
  bool used_by_scan = false;  // `lockwarden scan` reads it (serve reads every setting)
  // A secret: its flag is refused by LoadConfig (command lines are visible to every user), so
  // --help does not list it.
  bool refused_as_flag = false;
};
const std::vector<SettingInfo>& Settings();

std::string EnvVarFor(const std::string& key);  // "node_timeout_ms" -> "LOCKWARDEN_NODE_TIMEOUT_MS"
std::string FlagFor(const std::string& key);    // "node_timeout_ms" -> "--node-timeout-ms"

struct ConfigSources {
  std::optional<std::string> toml_path;    // --config / LOCKWARDEN_CONFIG
  std::map<std::string, std::string> env;  // the process environment (only LOCKWARDEN_* used)
  // key -> values from flags; several values only for lists (--master, --scan-pattern).
  std::map<std::string, std::vector<std::string>> flags;
};

// Builds and validates the configuration. Returns the config, or one message naming the
// setting, the source (file:line, env var or flag) and the reason.
std::variant<Config, std::string> LoadConfig(const ConfigSources& sources);

// Cross-field and range validation of a complete config; nullopt when it is sound.
std::optional<std::string> ValidateConfig(const Config& config);

}  // namespace lw
