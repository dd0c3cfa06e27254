// The settings table and the three sources: TOML file, LOCKWARDEN_* environment, flags.
// One table row per Config field drives all three sources, so a new setting is one row here
// plus its rule in validate.cc.

#include "config/config.h"

#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string_view>

namespace lw {
namespace {

constexpr std::string_view kEnvPrefix = "LOCKWARDEN_";

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// Where one setting lives in Config; the member's type decides how every source parses it.
using Target = std::variant<std::string Config::*, int64_t Config::*, double Config::*,
                            bool Config::*,
                            std::vector<MasterAddress> Config::*,
                            std::vector<std::string> Config::*>;

struct SettingDef {
  const char* key;
  Target target;
  const char* unit;     // shown in help and in type errors
  const char* meaning;  // one short phrase for --help
  bool scan = false;    // `lockwarden scan` uses it too (every setting is the agent's)
};

const std::vector<SettingDef>& Defs() {
  static const std::vector<SettingDef> defs = {
      {"socket_path", &Config::socket_path, "absolute path", "Unix socket the agent listens on"},
      {"masters", &Config::masters, "redis:// URLs",
       "independent Redis masters; a lock needs a majority of them", true},
      {"key_prefix", &Config::key_prefix, "string", "prefix of every lock key in Redis", true},
      {"fence_prefix", &Config::fence_prefix, "string",
       "prefix of the fence counters (no TTL by design; never reported as leaks)", true},
      {"fence_quorum", &Config::fence_quorum, "masters",
       "masters that must confirm a fenced grant; 0 = enough to survive a minority losing data"},
      {"restart_quarantine", &Config::restart_quarantine, "true|false",
       "a master younger than max_ttl_ms (or restarted) does not count toward quorum until then"},
      {"min_ttl_ms", &Config::min_ttl_ms, "ms", "smallest ttl a client may ask for"},
      {"max_ttl_ms", &Config::max_ttl_ms, "ms",
       "largest ttl a client may ask for; also how long a (re)started master is out of the "
       "quorum", true},
      {"default_ttl_ms", &Config::default_ttl_ms, "ms", "ttl when a request gives none"},
      {"max_wait_ms", &Config::max_wait_ms, "ms", "longest wait_ms a client may ask for"},
      {"node_timeout_ms", &Config::node_timeout_ms, "ms", "time allowed for one master's answer"},
      {"connect_timeout_ms", &Config::connect_timeout_ms, "ms", "TCP connect timeout per master",
       true},
      {"drift_factor", &Config::drift_factor, "fraction of the ttl",
       "clock-drift allowance subtracted from validity"},
      {"retry_delay_ms", &Config::retry_delay_ms, "ms", "pause between acquire attempts"},
      {"retry_jitter_ms", &Config::retry_jitter_ms, "ms", "random extra pause, up to this"},
      {"reconnect_max_backoff_ms", &Config::reconnect_max_backoff_ms, "ms",
       "cap of the reconnect backoff"},
      {"health_interval_ms", &Config::health_interval_ms, "ms", "period of the PING health check"},
      {"shutdown_grace_ms", &Config::shutdown_grace_ms, "ms",
       "time SIGTERM waits for releases to be answered"},
      {"log_level", &Config::log_level, "trace|debug|info|warn|error|critical|off",
       "log verbosity"},
      {"max_line_bytes", &Config::max_line_bytes, "bytes", "longest request line accepted"},
      {"max_connections", &Config::max_connections, "connections",
       "client sessions at once; more are closed at once"},
      {"max_inflight_per_session", &Config::max_inflight_per_session, "requests",
       "unanswered requests of one session; more get too_many"},
      {"max_locks_per_session", &Config::max_locks_per_session, "locks",
       "locks one session may hold at once"},
      {"max_waiters_per_resource", &Config::max_waiters_per_resource, "waiters",
       "queued acquires of one resource on this agent"},
      {"idle_timeout_ms", &Config::idle_timeout_ms, "ms",
       "close a session with no lock, no request and no input for this long; 0 = never"},
      {"max_unsent_bytes", &Config::max_unsent_bytes, "bytes",
       "stop reading a session whose unsent replies exceed this, until they drain"},
      {"socket_mode", &Config::socket_mode, "octal", "permissions of the Unix socket"},
      {"socket_owner", &Config::socket_owner, "user name or uid",
       "owner of the socket and its directory; empty = the agent's user"},
      {"socket_group", &Config::socket_group, "group name or gid",
       "group of the socket and its directory; empty = the agent's group"},
      {"access", &Config::access, "rules \"<uid:N|gid:N|user:NAME|group:NAME|any> <prefix>...\"",
       "who may lock which resource prefixes; none = any peer that can open the socket"},
      {"redis_user", &Config::redis_user, "ACL user name",
       "user for masters whose URL names none", true},
      {"redis_password_file", &Config::redis_password_file, "path",
       "file whose first line is the password for masters whose URL has none", true},
      {"redis_password", &Config::redis_password, "secret",
       "password for masters whose URL has none (env or TOML only, never a flag)", true},
      {"admin_listen", &Config::admin_listen, "host:port or off",
       "admin HTTP listener: /metrics, /healthz, /readyz, /api/v1"},
      {"admin_token_file", &Config::admin_token_file, "path",
       "file with the bearer token admin actions require; empty disables actions"},
      {"stuck_after_ms", &Config::stuck_after_ms, "ms",
       "operator page: a lock held longer (or not renewed with a longer ttl) is stuck"},
      {"admin_max_connections", &Config::admin_max_connections, "connections",
       "admin HTTP connections at once; more get 503"},
      {"admin_timeout_ms", &Config::admin_timeout_ms, "ms",
       "admin HTTP: deadline to receive a request and to send its response"},
      {"admin_max_body_bytes", &Config::admin_max_body_bytes, "bytes",
       "admin HTTP: largest request body"},
      {"scan_interval_ms", &Config::scan_interval_ms, "ms",
       "pause between leak-scanner passes; 0 turns the scanner off"},
      {"scan_keys_per_second", &Config::scan_keys_per_second, "keys/s",
       "scanner budget per master", true},
      {"scan_batch", &Config::scan_batch, "keys", "SCAN COUNT hint and PTTL pipeline depth", true},
      {"scan_patterns", &Config::scan_patterns, "glob patterns",
       "patterns scanned besides <key_prefix>*, e.g. * to audit every key", true},
  };
  return defs;
}

// List settings repeat as flags, are comma-separated in env and arrays in TOML.
bool IsList(const SettingDef& def) {
  return std::holds_alternative<std::vector<MasterAddress> Config::*>(def.target) ||
         std::holds_alternative<std::vector<std::string> Config::*>(def.target);
}

// The default of a setting as shown in help text, read from a default-constructed Config.
std::string DefaultText(const SettingDef& def) {
  static const Config defaults;
  return std::visit(Overloaded{
                        [](std::string Config::*m) { return "\"" + defaults.*m + "\""; },
                        [](int64_t Config::*m) { return std::to_string(defaults.*m); },
                        [](bool Config::*m) { return std::string(defaults.*m ? "true" : "false"); },
                        [](double Config::*m) {
                          char buf[32];
                          const auto result = std::to_chars(buf, buf + sizeof buf, defaults.*m);
                          return std::string(buf, result.ptr);
                        },
                        [](std::vector<MasterAddress> Config::*) { return std::string("none"); },
                        [](std::vector<std::string> Config::*) { return std::string("none"); },
                    },
                    def.target);
}

const SettingDef* FindDef(std::string_view key) {
  for (const SettingDef& def : Defs()) {
    if (key == def.key) return &def;
  }
  return nullptr;
}

// Levenshtein distance, for "did you mean" hints; names are short so O(n*m) is fine.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean <name>?" for the closest setting key (rendered by `render`), or "".
std::string Suggestion(std::string_view wrong,
                       const std::function<std::string(const std::string&)>& render) {
  const SettingDef* best = nullptr;
  size_t best_distance = 4;  // farther than this is a guess, not a typo
  for (const SettingDef& def : Defs()) {
    const std::string_view key = def.key;
    const bool prefix = wrong.size() >= 3 && (key.starts_with(wrong) || wrong.starts_with(key));
    const size_t distance = prefix ? 1 : EditDistance(wrong, key);
    if (distance < best_distance) {
      best = &def;
      best_distance = distance;
    }
  }
  return best ? "; did you mean " + render(best->key) + "?" : "";
}

std::string Fail(const std::string& key, const std::string& source, const std::string& reason) {
  return key + " (" + source + "): " + reason;
}

// ---------------------------------------------------------------------------------------------
// Parsing values. Each returns the reason when the value is refused.

using Reason = std::optional<std::string>;

Reason ParseInt(const std::string& text, const char* unit, int64_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) return "\"" + text + "\" is out of range";
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return "expected an integer (" + std::string(unit) + "), got \"" + text + "\"";
  }
  return std::nullopt;
}

Reason ParseBool(const std::string& text, bool& out) {
  if (text == "true" || text == "1") {
    out = true;
  } else if (text == "false" || text == "0") {
    out = false;
  } else {
    return "expected true or false, got \"" + text + "\"";
  }
  return std::nullopt;
}

Reason ParseDouble(const std::string& text, double& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return "expected a number such as 0.01, got \"" + text + "\"";
  }
  return std::nullopt;
}

// Parses every URL; the list replaces the masters of lower-precedence sources as a whole.
Reason ParseMasters(const std::vector<std::string>& urls, std::vector<MasterAddress>& out) {
  std::vector<MasterAddress> masters;
  for (size_t i = 0; i < urls.size(); ++i) {
    if (urls[i].empty()) return "entry " + std::to_string(i + 1) + " is empty";
    auto parsed = ParseMasterUrl(urls[i]);
    if (auto* error = std::get_if<std::string>(&parsed)) return *error;
    masters.push_back(std::get<MasterAddress>(std::move(parsed)));
  }
  out = std::move(masters);
  return std::nullopt;
}

Reason ParseStrings(const std::vector<std::string>& values, std::vector<std::string>& out) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].empty()) return "entry " + std::to_string(i + 1) + " is empty";
  }
  out = values;
  return std::nullopt;
}

// Applies a setting given as text (env or flag). Only list settings take several values.
Reason ApplyText(const SettingDef& def, const std::vector<std::string>& values, Config& config) {
  if (!IsList(def) && values.size() != 1) {
    return "given " + std::to_string(values.size()) + " times; give it once";
  }
  return std::visit(
      Overloaded{
          [&](std::string Config::*m) -> Reason {
            config.*m = values.front();
            return std::nullopt;
          },
          [&](int64_t Config::*m) { return ParseInt(values.front(), def.unit, config.*m); },
          [&](double Config::*m) { return ParseDouble(values.front(), config.*m); },
          [&](bool Config::*m) { return ParseBool(values.front(), config.*m); },
          [&](std::vector<MasterAddress> Config::*m) { return ParseMasters(values, config.*m); },
          [&](std::vector<std::string> Config::*m) { return ParseStrings(values, config.*m); },
      },
      def.target);
}

// Splits a list from env (LOCKWARDEN_MASTERS): comma-separated, blanks around entries ignored; "" is no master.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  if (text.find_first_not_of(" \t") == std::string::npos) return items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    items.push_back(first == std::string::npos ? "" : item.substr(first, last - first + 1));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::string TomlTypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string Expected(const std::string& what, const toml::node& node) {
  return "expected " + what + ", got " + TomlTypeName(node.type());
}

Reason TomlStrings(const toml::node& node, const std::string& example,
                   std::vector<std::string>& out) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return Expected("an array of strings, e.g. " + example, node);
  out.clear();
  for (const toml::node& element : *array) {
    const auto* text = element.as_string();
    if (text == nullptr) {
      return "entry " + std::to_string(out.size() + 1) + ": " + Expected("a string", element);
    }
    out.push_back(text->get());
  }
  return std::nullopt;
}

// Applies one TOML value; the TOML type must match the setting (an integer is accepted for
// drift_factor since "drift_factor = 0" is natural to write).
Reason ApplyToml(const SettingDef& def, const toml::node& node, Config& config) {
  return std::visit(
      Overloaded{
          [&](std::string Config::*m) -> Reason {
            const auto* value = node.as_string();
            if (value == nullptr) return Expected("a string", node);
            config.*m = value->get();
            return std::nullopt;
          },
          [&](int64_t Config::*m) -> Reason {
            const auto* value = node.as_integer();
            if (value == nullptr) {
              return Expected("an integer (" + std::string(def.unit) + ")", node);
            }
            config.*m = value->get();
            return std::nullopt;
          },
          [&](bool Config::*m) -> Reason {
            const auto* value = node.as_boolean();
            if (value == nullptr) return Expected("true or false", node);
            config.*m = value->get();
            return std::nullopt;
          },
          [&](double Config::*m) -> Reason {
            if (const auto* value = node.as_floating_point()) {
              config.*m = value->get();
            } else if (const auto* whole = node.as_integer()) {
              config.*m = static_cast<double>(whole->get());
            } else {
              return Expected("a number", node);
            }
            return std::nullopt;
          },
          [&](std::vector<MasterAddress> Config::*m) -> Reason {
            std::vector<std::string> urls;
            if (auto r = TomlStrings(node, "masters = [\"redis://127.0.0.1:6379\"]", urls)) {
              return r;
            }
            return ParseMasters(urls, config.*m);
          },
          [&](std::vector<std::string> Config::*m) -> Reason {
            std::vector<std::string> items;
            if (auto r = TomlStrings(node, std::string(def.key) + " = [\"...\"]", items)) {
              return r;
            }
            return ParseStrings(items, config.*m);
          },
      },
      def.target);
}

// ---------------------------------------------------------------------------------------------
// Sources. Each applies its settings over `config` and records in `origins` where each came
// from, so that a later validation error can name the source too.

using Origins = std::map<std::string, std::string>;

// Sets holds_secret when the file gives a Redis password (CheckTomlSecrecy).
Reason ApplyTomlFile(const std::string& path, Config& config, Origins& origins,
                     bool& holds_secret) {
  if (path.empty()) return "config file: the path is empty";
  // Checked first because toml++ reports only "could not be opened" and reads a directory
  // as an empty file.
  if (std::FILE* file = std::fopen(path.c_str(), "r")) {
    std::fclose(file);
  } else {
    return "config file " + path + ": cannot open: " + std::strerror(errno);
  }
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    return "config file " + path + ": is a directory";
  }
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    const auto& begin = error.source().begin;
    if (begin.line == 0) return "config file " + path + ": " + std::string(error.description());
    return "config file " + path + ":" + std::to_string(begin.line) + ":" +
           std::to_string(begin.column) + ": invalid TOML: " + std::string(error.description());
  }
  // toml::table iterates by key; report the first problem in file order instead.
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [key, node] : table) entries.emplace_back(&key, &node);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin.line < b.first->source().begin.line;
  });
  for (const auto& [key, node] : entries) {
    const std::string where = path + ":" + std::to_string(key->source().begin.line);
    const SettingDef* def = FindDef(key->str());
    if (def == nullptr) {
      return "unknown setting \"" + std::string(key->str()) + "\" at " + where +
             Suggestion(key->str(), [](const std::string& k) { return k; });
    }
    if (auto reason = ApplyToml(*def, *node, config)) return Fail(def->key, where, *reason);
    origins[def->key] = where;
    const std::string_view name = def->key;
    if (name == "redis_password" && !config.redis_password.empty()) holds_secret = true;
    if (name == "masters") {
      for (const MasterAddress& m : config.masters) holds_secret |= !m.password.empty();
    }
  }
  return std::nullopt;
}

// LOCKWARDEN_* variables that are not agent settings: the config path (read by the caller) and
// the variables the CLI uses as a client or sets for the children of `lockwarden lock`.
bool IsForeignEnv(std::string_view name) {
  static const std::set<std::string_view> foreign = {"LOCKWARDEN_CONFIG", "LOCKWARDEN_SOCKET",
                                                     "LOCKWARDEN_RESOURCE", "LOCKWARDEN_TOKEN",
                                                     "LOCKWARDEN_FENCE"};
  return foreign.contains(name);
}

Reason ApplyEnv(const std::map<std::string, std::string>& env, Config& config, Origins& origins) {
  for (const auto& [name, value] : env) {
    if (!name.starts_with(kEnvPrefix) || IsForeignEnv(name)) continue;
    std::string key = name.substr(kEnvPrefix.size());
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const SettingDef* def = EnvVarFor(key) == name ? FindDef(key) : nullptr;
    if (def == nullptr) {
      return "unknown environment variable " + name + ": no such setting" +
             Suggestion(key, [](const std::string& k) { return EnvVarFor(k); });
    }
    const std::string source = "env " + name;
    const std::vector<std::string> values =
        IsList(*def) ? SplitList(value) : std::vector<std::string>{value};
    if (auto reason = ApplyText(*def, values, config)) return Fail(def->key, source, *reason);
    origins[def->key] = source;
  }
  return std::nullopt;
}

Reason ApplyFlags(const std::map<std::string, std::vector<std::string>>& flags, Config& config,
                  Origins& origins) {
  for (const auto& [key, values] : flags) {
    if (values.empty()) continue;
    const SettingDef* def = FindDef(key);
    if (def == nullptr) {
      return "unknown setting \"" + key + "\" given as a flag" +
             Suggestion(key, [](const std::string& k) { return FlagFor(k); });
    }
    const std::string source = "flag " + FlagFor(key);
    if (key == "redis_password") {
      return Fail(key, source,
                  "a password on the command line is visible to every user of the host (ps, "
                  "/proc); use LOCKWARDEN_REDIS_PASSWORD or redis_password_file");
    }
    if (auto reason = ApplyText(*def, values, config)) return Fail(def->key, source, *reason);
    origins[def->key] = source;
  }
  return std::nullopt;
}

// The first line of a secret file, without its line ending. Refuses what is not a regular
// file, a file every user may read, and an empty secret.
Reason ReadSecretFile(const std::string& path, std::string& out) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return "cannot read " + path + ": " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
  if ((st.st_mode & S_IROTH) != 0) {
    return path + " may be read by every user of the host; chmod o-r it (e.g. 0640)";
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) return "cannot read " + path + ": " + std::strerror(errno);
  // The whole line, however long: a silently truncated password would only fail at AUTH.
  out.clear();
  std::getline(file, out);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (out.empty()) return path + ": the first line is empty";
  return std::nullopt;
}

// Gives masters whose URL carries no credentials the agent-wide ones.
Reason ApplyCredentials(Config& config, const Origins& origins) {
  std::string password = config.redis_password;
  if (!config.redis_password_file.empty()) {
    if (auto reason = ReadSecretFile(config.redis_password_file, password)) {
      return Fail("redis_password_file", origins.at("redis_password_file"), *reason);
    }
  }
  if (password.empty() && !config.redis_user.empty()) {
    return Fail("redis_user", origins.at("redis_user"),
                "an ACL user needs a password: set redis_password_file or "
                "LOCKWARDEN_REDIS_PASSWORD");
  }
  if (password.empty()) return std::nullopt;
  for (MasterAddress& m : config.masters) {
    if (!m.password.empty()) continue;
    if (m.user.empty()) m.user = config.redis_user;
    m.password = password;
  }
  // The file's password is not copied into redis_password: with both set, the loaded config
  // would fail ValidateConfig ("both set"). The masters carry it.
  return std::nullopt;
}

// Passwords in a TOML file every user may read are refused: anyone on the host could use them.
// `holds_secret` is what the file itself says (a master URL with a password, or
// redis_password), whether or not a later source overrides it: the file stays readable.
Reason CheckTomlSecrecy(const std::string& path, bool holds_secret) {
  struct stat st{};
  if (holds_secret && stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    return "config file " + path +
           " holds a Redis password and may be read by every user of the host; chmod o-r it "
           "(e.g. 0640)";
  }
  return std::nullopt;
}

}  // namespace

const std::vector<SettingInfo>& Settings() {
  static const std::vector<SettingInfo> settings = [] {
    std::vector<SettingInfo> out;
    for (const SettingDef& def : Defs()) {
      out.push_back({def.key,
                     std::string(def.meaning) + " (" + def.unit + ", default " +
                         DefaultText(def) + ")",
                     IsList(def), def.scan});
    }
    return out;
  }();
  return settings;
}

std::string EnvVarFor(const std::string& key) {
  std::string name(kEnvPrefix);
  for (char c : key) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string FlagFor(const std::string& key) {
  if (key == "masters") return "--master";  // repeatable: one URL per occurrence
  if (key == "scan_patterns") return "--scan-pattern";  // repeatable
  // "access" is repeatable too: --access "user:alice orders/" --access "group:ops *".
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::variant<Config, std::string> LoadConfig(const ConfigSources& sources) {
  Config config;
  Origins origins;
  if (sources.toml_path) {
    bool holds_secret = false;
    if (auto error = ApplyTomlFile(*sources.toml_path, config, origins, holds_secret)) {
      return *error;
    }
    if (auto error = CheckTomlSecrecy(*sources.toml_path, holds_secret)) return *error;
  }
  if (auto error = ApplyEnv(sources.env, config, origins)) return *error;
  if (auto error = ApplyFlags(sources.flags, config, origins)) return *error;
  if (auto error = ValidateConfig(config)) {
    // ValidateConfig's messages begin with "<key>: "; add where that key's value came from.
    const size_t colon = error->find(": ");
    if (colon == std::string::npos || FindDef(error->substr(0, colon)) == nullptr) return *error;
    const std::string key = error->substr(0, colon);
    const auto origin = origins.find(key);
    return Fail(key, origin == origins.end() ? "default" : origin->second,
                error->substr(colon + 2));
  }
  if (auto error = ApplyCredentials(config, origins)) return *error;
  return config;
}

}  // namespace lw
