// LoadConfig: the three sources applied in precedence order (TOML file < LOCKWARDEN_*
// environment < flags), each recording where a setting came from so an error can name it, then
// validation and the agent-wide Redis credentials.

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string_view>

#include "config/config.h"
#include "config/setting_table.h"
#include "config/setting_value.h"

namespace lw {
namespace {

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
    const SettingDef* def = FindSetting(key->str());
    if (def == nullptr) {
      return "unknown setting \"" + std::string(key->str()) + "\" at " + where +
             Suggestion(key->str(), [](const std::string& k) { return k; });
    }
    if (auto reason = ApplyToml(*def, *node, config)) return SettingError(def->key, where, *reason);
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
// the variables the CLI uses as a client (the socket; the admin token of `status --fleet` and
// `who`) or sets for the children of `lockwarden lock`, and the channel an in-place upgrade
// gives the new process (docs/upgrade.md).
bool IsForeignEnv(std::string_view name) {
  static const std::set<std::string_view> foreign = {
      "LOCKWARDEN_CONFIG",   "LOCKWARDEN_SOCKET", "LOCKWARDEN_ADMIN_TOKEN",
      "LOCKWARDEN_RESOURCE", "LOCKWARDEN_TOKEN",  "LOCKWARDEN_FENCE",
      "LOCKWARDEN_HANDOVER_FD"};
  return foreign.contains(name);
}

Reason ApplyEnv(const std::map<std::string, std::string>& env, Config& config, Origins& origins) {
  for (const auto& [name, value] : env) {
    if (!name.starts_with(kSettingEnvPrefix) || IsForeignEnv(name)) continue;
    std::string key = name.substr(kSettingEnvPrefix.size());
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const SettingDef* def = EnvVarFor(key) == name ? FindSetting(key) : nullptr;
    if (def == nullptr) {
      return "unknown environment variable " + name + ": no such setting" +
             Suggestion(key, [](const std::string& k) { return EnvVarFor(k); });
    }
    const std::string source = "env " + name;
    const std::vector<std::string> values =
        IsList(*def) ? SplitList(value) : std::vector<std::string>{value};
    if (auto reason = ApplyText(*def, values, config))
      return SettingError(def->key, source, *reason);
    origins[def->key] = source;
  }
  return std::nullopt;
}

Reason ApplyFlags(const std::map<std::string, std::vector<std::string>>& flags, Config& config,
                  Origins& origins) {
  for (const auto& [key, values] : flags) {
    if (values.empty()) continue;
    const SettingDef* def = FindSetting(key);
    if (def == nullptr) {
      return "unknown setting \"" + key + "\" given as a flag" +
             Suggestion(key, [](const std::string& k) { return FlagFor(k); });
    }
    const std::string source = "flag " + FlagFor(key);
    if (def->reach == Reach::kSecret) {
      return SettingError(
          key, source,
          "a password on the command line is visible to every user of the host (ps, "
          "/proc); use LOCKWARDEN_REDIS_PASSWORD or redis_password_file");
    }
    if (auto reason = ApplyText(*def, values, config))
      return SettingError(def->key, source, *reason);
    origins[def->key] = source;
  }
  return std::nullopt;
}

// The first line of a secret file, without its line ending. Refuses what is not a regular
// file, a file every user may read, and an empty secret.
Reason ReadSecretFile(const std::string& path, std::string& out) {
  struct stat st {};
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
      return SettingError("redis_password_file", origins.at("redis_password_file"), *reason);
    }
  }
  if (password.empty() && !config.redis_user.empty()) {
    return SettingError("redis_user", origins.at("redis_user"),
                        "an ACL user needs a password: set redis_password_file or "
                        "LOCKWARDEN_REDIS_PASSWORD");
  }
  if (password.empty()) {
    for (const MasterAddress& m : config.masters) {
      if (m.user.empty() || !m.password.empty()) continue;
      return SettingError("masters", origins.at("masters"),
                          "the URL of " + m.Display() +
                              " names an ACL user but no password: add it to the URL or set "
                              "redis_password_file or LOCKWARDEN_REDIS_PASSWORD");
    }
    return std::nullopt;
  }
  for (MasterAddress& m : config.masters) {
    if (!m.password.empty()) continue;
    if (m.user.empty()) m.user = config.redis_user;
    m.password = password;
  }
  // The file's password is not copied into redis_password: with both set, the loaded config
  // would fail ValidateConfig ("both set"). The masters carry it.
  return std::nullopt;
}

// Gives rediss:// masters the agent-wide TLS settings (ValidateConfig checked them).
void ApplyTls(Config& config) {
  for (MasterAddress& m : config.masters) {
    if (!m.tls.enabled) continue;
    m.tls.ca_file = config.redis_tls_ca_file;
    m.tls.cert_file = config.redis_tls_cert_file;
    m.tls.key_file = config.redis_tls_key_file;
    m.tls.server_name = config.redis_tls_server_name;
    m.tls.verify = !config.redis_tls_insecure_skip_verify;
  }
}

// Passwords in a TOML file every user may read are refused: anyone on the host could use them.
// `holds_secret` is what the file itself says (a master URL with a password, or
// redis_password), whether or not a later source overrides it: the file stays readable.
Reason CheckTomlSecrecy(const std::string& path, bool holds_secret) {
  struct stat st {};
  if (holds_secret && stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    return "config file " + path +
           " holds a Redis password and may be read by every user of the host; chmod o-r it "
           "(e.g. 0640)";
  }
  return std::nullopt;
}

}  // namespace

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
    if (colon == std::string::npos || FindSetting(error->substr(0, colon)) == nullptr)
      return *error;
    const std::string key = error->substr(0, colon);
    const auto origin = origins.find(key);
    return SettingError(key, origin == origins.end() ? "default" : origin->second,
                        error->substr(colon + 2));
  }
  if (auto error = ApplyCredentials(config, origins)) return *error;
  ApplyTls(config);
  return config;
}

}  // namespace lw
