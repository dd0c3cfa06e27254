// libFuzzer target: the agent's configuration sources and the parsers behind them.
//
// The first byte picks what the rest of the input is:
//   't' a TOML file: written to a memfd (mode 0600) and loaded by path with LoadConfig
//   'c' a TOML file, a line "---", then environment lines NAME=VALUE: both sources at once
//   'e' environment lines NAME=VALUE, each given to LoadConfig as LOCKWARDEN_<NAME>
//   'f' flag lines key=value (a key may repeat, as --master does)
//   'm' a master URL for ParseMasterUrl
//   'l' an admin listen address for ParseListenAddress
//   'a' an access rule for ParseAccessRule and AccessPolicy
// (any other first byte: its value modulo 7 picks, so no mutation is wasted).
// When neither environment nor flags name masters, one is supplied so that inputs get past
// "at least one master" to the other checks; an empty LOCKWARDEN_MASTERS= still removes it.
//
// Invariants, beyond "does not crash" (ASan+UBSan):
//   LoadConfig: a config that loads passes ValidateConfig, and when a password applies every
//     master carries one; an error is non-empty and names a setting (as "<key> (<source>):"),
//     the file, or the unknown setting or variable it refuses.
//   ParseMasterUrl: the result or the error is the same when only the password differs (no
//     message depends on a secret); a parsed master names a host and a port in 1..65535, its
//     credentials are split where MaskCredentials splits them, it passes ValidateConfig alone,
//     and "redis://" + Display() parses back to the same host and port.
//   ParseListenAddress: "off" is the only way to turn the listener off; a parsed address
//     round-trips through its text form, and IsLoopbackHost is true only for addresses that
//     really are loopback (the admin token is waived for those).
//   ParseAccessRule: a rule keeps its text, has one prefix per word after the first (but a
//     trailing +leases), and an AccessPolicy of it lets the peer it names lock every one of its
//     prefixes (and manage other uids' detached leases there when +leases), and no one
//     else anything unless it is "any".
// Secret files for redis_password_file live in /dev/shm/lockwarden-fuzz/ (created at start):
// password (0600), open-password (0644, refused), empty-password (0600, refused). Inputs that
// point redis_password_file anywhere else are skipped: what exists elsewhere differs between
// machines (the gating run must be the same everywhere), and a FIFO or device could block.

#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"
#include "core/access.h"
#include "fuzz/fuzz_check.h"

namespace lw {
namespace {

constexpr const char* kSecretDir = "/dev/shm/lockwarden-fuzz";
constexpr uint32_t kResolved = 4242;  // what every user and group name resolves to

int g_toml_fd = -1;
std::string g_toml_path;  // /proc/self/fd/N of the memfd

void WriteFile(const std::string& path, std::string_view text, mode_t mode) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr || std::fwrite(text.data(), 1, text.size(), file) != text.size() ||
      std::fclose(file) != 0 || chmod(path.c_str(), mode) != 0) {
    std::fprintf(stderr, "config_fuzz: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(1);
  }
}

void Setup() {
  g_toml_fd = memfd_create("lockwarden-fuzz.toml", 0);
  if (g_toml_fd < 0 || fchmod(g_toml_fd, 0600) != 0) {
    std::fprintf(stderr, "config_fuzz: memfd: %s\n", std::strerror(errno));
    std::exit(1);
  }
  g_toml_path = "/proc/self/fd/" + std::to_string(g_toml_fd);
  mkdir(kSecretDir, 0700);
  const std::string dir = kSecretDir;
  WriteFile(dir + "/password", "s3cret\n", 0600);
  WriteFile(dir + "/open-password", "s3cret\n", 0644);
  WriteFile(dir + "/empty-password", "\n", 0600);
}

void SetTomlFile(std::string_view text) {
  if (ftruncate(g_toml_fd, 0) != 0 ||
      pwrite(g_toml_fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    std::fprintf(stderr, "config_fuzz: memfd write: %s\n", std::strerror(errno));
    std::exit(1);
  }
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// "name=value" -> {name, value}; a line without '=' is a name with an empty value.
std::pair<std::string, std::string> Assignment(std::string_view line) {
  const size_t eq = line.find('=');
  if (eq == std::string_view::npos) return {std::string(line), ""};
  return {std::string(line.substr(0, eq)), std::string(line.substr(eq + 1))};
}

// True if `path` is inside kSecretDir, which the target fills itself, and reading it cannot
// block. Anywhere else the file system differs between machines (and reading a FIFO or a
// device could block), so the same input would not give the same run everywhere.
bool SafeToRead(const std::string& path) {
  if (path.empty()) return true;  // "no password file"
  const std::string dir = std::string(kSecretDir) + "/";
  if (!path.starts_with(dir) || path.find("/..") != std::string::npos) return false;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return true;
  return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
}

// The redis_password_file a TOML text names, if it parses and names one.
std::optional<std::string> TomlPasswordFile(std::string_view text) {
  try {
    const toml::table table = toml::parse(text);
    if (const auto* value = table.get_as<std::string>("redis_password_file")) return value->get();
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

bool NamesSetting(const std::string& message) {
  for (const SettingInfo& setting : Settings()) {
    if (message.starts_with(setting.key + " (")) return true;
  }
  return false;
}

// toml_text: what the file at sources.toml_path holds, if there is one.
void CheckLoad(const ConfigSources& sources, std::optional<std::string_view> toml_text) {
  // Inputs that would make LoadConfig read a device or a FIFO are not tested (see the top).
  if (toml_text) {
    if (auto path = TomlPasswordFile(*toml_text); path && !SafeToRead(*path)) return;
  }
  if (auto it = sources.env.find("LOCKWARDEN_REDIS_PASSWORD_FILE");
      it != sources.env.end() && !SafeToRead(it->second)) {
    return;
  }
  if (auto it = sources.flags.find("redis_password_file"); it != sources.flags.end()) {
    for (const std::string& path : it->second) {
      if (!SafeToRead(path)) return;
    }
  }

  const auto loaded = LoadConfig(sources);
  if (const auto* error = std::get_if<std::string>(&loaded)) {
    LW_FUZZ_CHECK(!error->empty(), "LoadConfig failed with an empty message");
    const bool names_file = sources.toml_path && error->find(*sources.toml_path) != error->npos;
    const bool names_unknown = error->starts_with("unknown setting \"") ||
                               error->starts_with("unknown environment variable LOCKWARDEN_");
    LW_FUZZ_CHECK(names_file || names_unknown || NamesSetting(*error),
                  "error names neither a setting nor the file: " + *error);
    return;
  }
  const Config& config = std::get<Config>(loaded);
  const auto problem = ValidateConfig(config);
  LW_FUZZ_CHECK(!problem, "a config that loaded fails ValidateConfig: " + problem.value_or(""));
  if (!config.redis_password.empty() || !config.redis_password_file.empty()) {
    for (const MasterAddress& master : config.masters) {
      LW_FUZZ_CHECK(!master.password.empty(),
                    "a password is configured but master " + master.Display() + " has none");
    }
  }
}

void FuzzToml(std::string_view text) {
  SetTomlFile(text);
  ConfigSources sources;
  sources.toml_path = g_toml_path;
  CheckLoad(sources, text);
}

void AddEnv(std::string_view lines, ConfigSources& sources) {
  for (std::string_view line : Lines(lines)) {
    auto [name, value] = Assignment(line);
    sources.env["LOCKWARDEN_" + name] = value;
  }
}

void FuzzTomlAndEnv(std::string_view text) {
  const size_t split = text.find("\n---\n");
  const std::string_view toml_text = text.substr(0, split);
  SetTomlFile(toml_text);
  ConfigSources sources;
  sources.toml_path = g_toml_path;
  if (split != std::string_view::npos) AddEnv(text.substr(split + 5), sources);
  CheckLoad(sources, toml_text);
}

void FuzzEnv(std::string_view text) {
  ConfigSources sources;
  AddEnv(text, sources);
  sources.env.emplace("LOCKWARDEN_MASTERS", "redis://127.0.0.1:6379");  // unless given
  CheckLoad(sources, std::nullopt);
}

void FuzzFlags(std::string_view text) {
  ConfigSources sources;
  for (std::string_view line : Lines(text)) {
    auto [key, value] = Assignment(line);
    sources.flags[key].push_back(value);
  }
  if (!sources.flags.contains("masters")) sources.flags["masters"] = {"redis://127.0.0.1:6379"};
  CheckLoad(sources, std::nullopt);
}

// Where MaskCredentials puts the secret: after the first ':' of the userinfo (between "://" and
// the last '@'), or the whole userinfo when it has no ':'. [begin, end) of url; empty if none.
std::pair<size_t, size_t> SecretSpan(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const size_t start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const size_t at = url.rfind('@');
  if (at == std::string::npos || at < start) return {0, 0};
  const size_t colon = url.find(':', start);
  if (colon != std::string::npos && colon < at) return {colon + 1, at};
  return {start, at};
}

void FuzzMasterUrl(const std::string& url) {
  const auto parsed = ParseMasterUrl(url);
  const auto [secret_begin, secret_end] = SecretSpan(url);

  // The same URL with another password of the same length: same outcome, same words.
  std::string other = url;
  for (size_t i = secret_begin; i < secret_end; ++i) other[i] = other[i] == 'x' ? 'y' : 'x';
  const auto parsed_other = ParseMasterUrl(other);
  LW_FUZZ_CHECK(parsed.index() == parsed_other.index(),
                "the password decides whether the URL parses: " + url);
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    LW_FUZZ_CHECK(!error->empty(), "empty error for a master URL");
    LW_FUZZ_CHECK(*error == std::get<std::string>(parsed_other),
                  "the error message depends on the password: " + *error + " / " +
                      std::get<std::string>(parsed_other));
    return;
  }

  const MasterAddress& address = std::get<MasterAddress>(parsed);
  LW_FUZZ_CHECK(!address.host.empty(), "parsed master without a host: " + url);
  LW_FUZZ_CHECK(address.host.find('\0') == std::string::npos,
                "a host with a NUL: hiredis would connect to what precedes it: " + url);
  LW_FUZZ_CHECK(address.port >= 1 && address.port <= 65535, "port out of range: " + url);
  const std::string secret = url.substr(secret_begin, secret_end - secret_begin);
  // A userinfo without ':' is an ACL user alone (its password comes from the agent's setting);
  // MaskCredentials masks it all the same, in case a password was written without its ':'.
  const bool user_only = secret_begin > 0 && url[secret_begin - 1] != ':';
  const std::string& read = user_only ? address.user : address.password;
  LW_FUZZ_CHECK(read == secret, "credential is not what MaskCredentials masks: " + url);
  LW_FUZZ_CHECK(!user_only || address.password.empty(), "a user alone with a password: " + url);
  const MasterAddress& other_address = std::get<MasterAddress>(parsed_other);
  LW_FUZZ_CHECK((user_only ? other_address.user : other_address.password) ==
                    other.substr(secret_begin, secret_end - secret_begin),
                "credential is not what MaskCredentials masks: " + other);
  LW_FUZZ_CHECK(address.Display().find('@') == std::string::npos,
                "Display() shows credentials: " + address.Display());

  Config config;
  config.masters = {address};
  const auto problem = ValidateConfig(config);
  LW_FUZZ_CHECK(!problem, "a parsed master fails ValidateConfig: " + problem.value_or(""));

  const auto again = ParseMasterUrl("redis://" + address.Display());
  LW_FUZZ_CHECK(
      std::holds_alternative<MasterAddress>(again),
      "redis://" + address.Display() + " does not parse: " + std::get<std::string>(again));
  LW_FUZZ_CHECK(std::get<MasterAddress>(again).host == address.host &&
                    std::get<MasterAddress>(again).port == address.port,
                "redis://" + address.Display() + " parses to another address");
}

bool ReallyLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

void FuzzListenAddress(const std::string& text) {
  const auto parsed = ParseListenAddress(text);
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    LW_FUZZ_CHECK(!error->empty(), "empty error for a listen address");
    return;
  }
  const auto& listen = std::get<std::optional<ListenAddress>>(parsed);
  LW_FUZZ_CHECK(listen.has_value() == (text != "off"), "only \"off\" turns the listener off");
  if (!listen) return;
  LW_FUZZ_CHECK(!listen->host.empty(), "listen address without a host: " + text);
  LW_FUZZ_CHECK(listen->host.find('\0') == std::string::npos,
                "a host with a NUL: the listener would bind what precedes it: " + text);
  LW_FUZZ_CHECK(listen->port >= 0 && listen->port <= 65535, "port out of range: " + text);
  LW_FUZZ_CHECK(!IsLoopbackHost(listen->host) || ReallyLoopback(listen->host),
                "IsLoopbackHost accepts a host that is not loopback: " + listen->host);
  const bool v6 = listen->host.find(':') != std::string::npos;
  const std::string shown =
      (v6 ? "[" + listen->host + "]" : listen->host) + ":" + std::to_string(listen->port);
  const auto again = ParseListenAddress(shown);
  const auto* reparsed = std::get_if<std::optional<ListenAddress>>(&again);
  LW_FUZZ_CHECK(reparsed != nullptr && reparsed->has_value() && (*reparsed)->host == listen->host &&
                    (*reparsed)->port == listen->port,
                "\"" + shown + "\" does not parse back to the same address");
}

void FuzzAccessRule(const std::string& text) {
  const auto parsed = ParseAccessRule(text);
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    LW_FUZZ_CHECK(!error->empty(), "empty error for an access rule");
    return;
  }
  const AccessRule& rule = std::get<AccessRule>(parsed);
  LW_FUZZ_CHECK(rule.text == text, "the rule does not keep its text");
  size_t words = 0;
  for (size_t i = 0; i < text.size();) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i < text.size()) ++words;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
  }
  const size_t leases_word = rule.leases ? 1 : 0;  // a trailing "+leases" is no prefix
  LW_FUZZ_CHECK(words >= 2 + leases_word && rule.prefixes.size() == words - 1 - leases_word,
                "prefixes are not the words after the first: " + text);

  // Names resolve to kResolved; a peer with those ids is the one the rule names.
  const NameResolver resolver{[](const std::string&) { return std::optional<uid_t>(kResolved); },
                              [](const std::string&) { return std::optional<gid_t>(kResolved); }};
  const auto built = AccessPolicy::Build({text}, resolver);
  LW_FUZZ_CHECK(std::holds_alternative<AccessPolicy>(built),
                "a rule that parses does not build: " + std::get<std::string>(built));
  const AccessPolicy& policy = std::get<AccessPolicy>(built);
  const uint32_t id = rule.who == AccessRule::Who::kUser || rule.who == AccessRule::Who::kGroup
                          ? kResolved
                          : rule.id;
  PeerIds named;
  PeerIds stranger{static_cast<uid_t>(id + 1), static_cast<gid_t>(id + 1), {}};
  switch (rule.who) {
    case AccessRule::Who::kUid:
    case AccessRule::Who::kUser:
      named.uid = static_cast<uid_t>(id);
      break;
    case AccessRule::Who::kGid:
    case AccessRule::Who::kGroup:
      named.groups = {static_cast<gid_t>(id)};  // a supplementary group counts too
      break;
    case AccessRule::Who::kAny:
      break;
  }
  for (const std::string& prefix : rule.prefixes) {
    LW_FUZZ_CHECK(policy.Allows(named, prefix + "x"),
                  "the peer the rule names may not lock under \"" + prefix + "\": " + text);
    LW_FUZZ_CHECK(policy.Allows(stranger, prefix + "x") == (rule.who == AccessRule::Who::kAny),
                  "a peer the rule does not name is treated wrongly: " + text);
    LW_FUZZ_CHECK(policy.AllowsLeases(named, prefix + "x") == rule.leases,
                  "+leases does not decide who manages other uids' leases: " + text);
  }
}

}  // namespace
}  // namespace lw

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  lw::Setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr std::string_view kModes = "tcefmla";
  size_t mode = kModes.find(static_cast<char>(data[0]));
  if (mode == std::string_view::npos) mode = data[0] % kModes.size();
  switch (kModes[mode]) {
    case 't':
      lw::FuzzToml(rest);
      break;
    case 'c':
      lw::FuzzTomlAndEnv(rest);
      break;
    case 'e':
      lw::FuzzEnv(rest);
      break;
    case 'f':
      lw::FuzzFlags(rest);
      break;
    case 'm':
      lw::FuzzMasterUrl(std::string(rest));
      break;
    case 'l':
      lw::FuzzListenAddress(std::string(rest));
      break;
    case 'a':
      lw::FuzzAccessRule(std::string(rest));
      break;
  }
  return 0;
}
