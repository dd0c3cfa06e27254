// Config defaults, the settings table (keys, help lines, env and flag names) and master URLs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "config/config.h"
#include "unit/config_fixture.h"

namespace lw::config_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Defaults, settings table, names.

TEST(ConfigDefaults, ValidOnceAMasterIsGiven) {
  EXPECT_EQ(ValidateConfig(ValidConfig()), std::nullopt);
  const Config loaded = MustLoad(WithMasterFlag());
  const Config defaults;
  EXPECT_EQ(loaded.socket_path, defaults.socket_path);
  EXPECT_EQ(loaded.node_timeout_ms, defaults.node_timeout_ms);
  EXPECT_EQ(loaded.drift_factor, defaults.drift_factor);
  ASSERT_EQ(loaded.masters.size(), 1u);
  EXPECT_EQ(loaded.masters[0].Display(), "127.0.0.1:6379");
}

TEST(ConfigDefaults, NoMasterSaysHowToGiveOne) {
  const auto error = ValidateConfig(Config{});
  ASSERT_TRUE(error.has_value());
  EXPECT_THAT(*error, StartsWith("masters: "));
  EXPECT_THAT(*error, HasSubstr("--master redis://127.0.0.1:6379"));
  EXPECT_THAT(LoadError({}), StartsWith("masters (default): "));
}

TEST(ConfigSettings, OneEntryPerFieldWithUnitAndDefault) {
  for (const SettingInfo& s : Settings()) {
    EXPECT_THAT(s.help, HasSubstr("default")) << s.key;
    if (s.key.ends_with("_ms")) {
      EXPECT_THAT(s.help, HasSubstr("ms")) << s.key;
    }
  }
  EXPECT_THAT(Settings()[10].help, HasSubstr("default 50"));
  EXPECT_THAT(Settings()[12].help, HasSubstr("0.01"));
  EXPECT_THAT(Settings()[5].help, HasSubstr("default true"));
}

TEST(ConfigSettings, KeysAndTheirNamesAreDistinct) {
  std::set<std::string> keys, env_vars, flags;
  for (const SettingInfo& s : Settings()) {
    EXPECT_TRUE(keys.insert(s.key).second) << s.key;
    EXPECT_TRUE(env_vars.insert(EnvVarFor(s.key)).second) << s.key;
    EXPECT_TRUE(flags.insert(FlagFor(s.key)).second) << s.key;
    EXPECT_FALSE(s.key.empty());
    for (char c : s.key) EXPECT_TRUE(std::islower(c) || std::isdigit(c) || c == '_') << s.key;
  }
}

// Each row of the settings table in docs/configuration.md (the table headed "| TOML key |"):
// "| `key` | `ENV` ... | `--flag` ... |".
struct DocumentedSetting {
  std::string env_column;
  std::string flag_column;
};

std::map<std::string, DocumentedSetting> DocumentedSettings() {
  // This file is tests/unit/ of the source tree (compilers name it by its absolute path).
  const std::filesystem::path doc =
      std::filesystem::path(__FILE__).parent_path() / "../../docs/configuration.md";
  std::ifstream in(doc);
  EXPECT_TRUE(in) << doc << " not found";
  std::map<std::string, DocumentedSetting> rows;
  std::string line;
  while (std::getline(in, line) && !line.starts_with("| TOML key |")) {
  }
  while (std::getline(in, line) && line.starts_with("|")) {
    if (!line.starts_with("| `")) continue;  // the header's rule
    std::vector<std::string> cells;
    for (size_t start = 1, bar; (bar = line.find(" |", start)) != std::string::npos;
         start = bar + 2) {
      cells.push_back(line.substr(start + 1, bar - start - 1));
    }
    if (cells.size() < 3) continue;
    const std::string key = cells[0].substr(1, cells[0].find('`', 1) - 1);
    rows[key] = {cells[1], cells[2]};
  }
  return rows;
}

// The documented table and Settings() name the same settings, each with its env var and flag:
// a new row is documented, and a key is never renamed or dropped without the table saying so.
TEST(ConfigSettings, EveryRowIsDocumentedWithItsNames) {
  std::map<std::string, DocumentedSetting> documented = DocumentedSettings();
  for (const SettingInfo& s : Settings()) {
    auto it = documented.find(s.key);
    if (it == documented.end()) {
      ADD_FAILURE() << s.key << " has no row in the table of docs/configuration.md";
      continue;
    }
    EXPECT_THAT(it->second.env_column, StartsWith("`" + EnvVarFor(s.key) + "`")) << s.key;
    if (s.refused_as_flag) {
      EXPECT_THAT(it->second.flag_column, HasSubstr("is refused")) << s.key;
    } else {
      EXPECT_THAT(it->second.flag_column, StartsWith("`" + FlagFor(s.key) + "`")) << s.key;
    }
    documented.erase(it);
  }
  for (const auto& [key, row] : documented) {
    ADD_FAILURE() << "docs/configuration.md documents " << key << ", which is no setting";
  }
}

// Every row is read from the TOML file, the environment and the command line: a value of the
// wrong shape is refused naming the setting and its source, never as an unknown setting.
class ConfigEverySource : public ConfigFileTest {};

TEST_F(ConfigEverySource, EveryRowIsReadFromEachSource) {
  for (const SettingInfo& s : Settings()) {
    ConfigSources env = WithMasterFlag();
    env.env[EnvVarFor(s.key)] = std::string(1, '\x01');
    ConfigSources flag = WithMasterFlag();
    flag.flags[s.key] = {std::string(1, '\x01')};
    ConfigSources toml = WithMasterFlag();
    toml.toml_path = Write("every.toml", s.key + " = { table = 1 }\n");
    const std::vector<std::pair<std::string, ConfigSources>> sources = {
        {EnvVarFor(s.key), env}, {FlagFor(s.key), flag}, {"every.toml", toml}};
    for (const auto& [source, given] : sources) {
      const auto loaded = LoadConfig(given);
      const auto* error = std::get_if<std::string>(&loaded);
      if (error == nullptr) continue;  // a string setting may take any text
      EXPECT_THAT(*error, Not(HasSubstr("unknown"))) << s.key << " from " << source;
      EXPECT_THAT(*error, StartsWith(s.key)) << s.key << " from " << source;
    }
  }
}

TEST(ConfigSettings, BooleansFromEverySource) {
  auto from_flag = [](const std::string& value) {
    return LoadConfig({std::nullopt, {}, {{"masters", {"redis://127.0.0.1:6379"}},
                                          {"restart_quarantine", {value}}}});
  };
  EXPECT_FALSE(std::get<Config>(from_flag("false")).restart_quarantine);
  EXPECT_TRUE(std::get<Config>(from_flag("1")).restart_quarantine);
  auto bad = from_flag("maybe");
  ASSERT_TRUE(std::holds_alternative<std::string>(bad));
  EXPECT_THAT(std::get<std::string>(bad), HasSubstr("expected true or false"));
  auto env = LoadConfig({std::nullopt,
                         {{"LOCKWARDEN_MASTERS", "redis://127.0.0.1:6379"},
                          {"LOCKWARDEN_RESTART_QUARANTINE", "false"}},
                         {}});
  EXPECT_FALSE(std::get<Config>(env).restart_quarantine);
}

TEST(ConfigValidate, FencePrefixMustNotOverlapTheLockPrefix) {
  Config c;
  c.masters = {MasterAddress{"127.0.0.1", 6379, "", "", {}}};
  c.key_prefix = "app:";
  c.fence_prefix = "app:fence:";
  EXPECT_THAT(ValidateConfig(c).value_or(""), HasSubstr("fence_prefix"));
  c.fence_prefix = "ap";
  EXPECT_THAT(ValidateConfig(c).value_or(""), HasSubstr("must not start with one another"));
  c.fence_prefix = "fence:";
  EXPECT_EQ(ValidateConfig(c), std::nullopt);
}

TEST(ConfigValidate, FenceQuorumIsAutoOrBetweenQuorumAndMasters) {
  Config c;
  for (int i = 0; i < 5; ++i) c.masters.push_back(MasterAddress{"127.0.0.1", 7000 + i, "", "", {}});
  c.fence_quorum = 2;
  EXPECT_THAT(ValidateConfig(c).value_or(""), HasSubstr("3..5"));
  c.fence_quorum = 6;
  EXPECT_THAT(ValidateConfig(c).value_or(""), HasSubstr("fence_quorum"));
  for (int ok : {0, 3, 4, 5}) {
    c.fence_quorum = ok;
    EXPECT_EQ(ValidateConfig(c), std::nullopt) << ok;
  }
}

TEST(ConfigSettings, EnvAndFlagNames) {
  EXPECT_EQ(EnvVarFor("node_timeout_ms"), "LOCKWARDEN_NODE_TIMEOUT_MS");
  EXPECT_EQ(FlagFor("node_timeout_ms"), "--node-timeout-ms");
  EXPECT_EQ(EnvVarFor("masters"), "LOCKWARDEN_MASTERS");
  EXPECT_EQ(FlagFor("masters"), "--master");
  EXPECT_EQ(EnvVarFor("socket_path"), "LOCKWARDEN_SOCKET_PATH");
  EXPECT_EQ(FlagFor("reconnect_max_backoff_ms"), "--reconnect-max-backoff-ms");
}

// ---------------------------------------------------------------------------------------------
// Master URLs.

TEST(MasterUrl, UserAndPassword) {
  const MasterAddress m = MustParseUrl("redis://alice:s3cret@redis-1.internal:7000");
  EXPECT_EQ(m.host, "redis-1.internal");
  EXPECT_EQ(m.port, 7000);
  EXPECT_EQ(m.user, "alice");
  EXPECT_EQ(m.password, "s3cret");
  EXPECT_EQ(m.Display(), "redis-1.internal:7000");
}

TEST(MasterUrl, PasswordOnlyAndDefaultPort) {
  const MasterAddress m = MustParseUrl("redis://:s3cret@10.0.0.7");
  EXPECT_EQ(m.host, "10.0.0.7");
  EXPECT_EQ(m.port, 6379);
  EXPECT_EQ(m.user, "");
  EXPECT_EQ(m.password, "s3cret");
  const MasterAddress plain = MustParseUrl("redis://localhost");
  EXPECT_EQ(plain.port, 6379);
  EXPECT_TRUE(plain.password.empty());
  EXPECT_EQ(MustParseUrl("REDIS://h:1/").Display(), "h:1");
}

TEST(MasterUrl, PasswordMayHoldUrlCharacters) {
  const MasterAddress m = MustParseUrl("redis://u:p@ss/w?rd@host:6380");
  EXPECT_EQ(m.password, "p@ss/w?rd");
  EXPECT_EQ(m.Display(), "host:6380");
}

TEST(MasterUrl, BracketedIpv6) {
  const MasterAddress m = MustParseUrl("redis://[::1]:6380");
  EXPECT_EQ(m.host, "::1");
  EXPECT_EQ(m.port, 6380);
  EXPECT_EQ(m.Display(), "[::1]:6380");
  EXPECT_EQ(MustParseUrl("redis://[fe80::1]").port, 6379);
  EXPECT_THAT(UrlError("redis://::1:6379"), HasSubstr("brackets"));
  EXPECT_THAT(UrlError("redis://[zz]:6379"), HasSubstr("not an IPv6 address"));
  EXPECT_THAT(UrlError("redis://[::1"), HasSubstr("not closed"));
}

TEST(MasterUrl, BadPorts) {
  EXPECT_THAT(UrlError("redis://h:0"), HasSubstr("out of range 1..65535"));
  EXPECT_THAT(UrlError("redis://h:70000"), HasSubstr("out of range 1..65535"));
  EXPECT_THAT(UrlError("redis://h:99999999999999999999"), HasSubstr("out of range"));
  EXPECT_THAT(UrlError("redis://h:abc"), HasSubstr("not a number"));
  EXPECT_THAT(UrlError("redis://h:-1"), HasSubstr("not a number"));
  EXPECT_THAT(UrlError("redis://h:"), HasSubstr("port"));
}

TEST(MasterUrl, SchemeAndHost) {
  EXPECT_TRUE(MustParseUrl("rediss://h:6380").tls.enabled);
  EXPECT_TRUE(MustParseUrl("REDISS://h").tls.enabled);
  EXPECT_FALSE(MustParseUrl("redis://h:6379").tls.enabled);
  EXPECT_EQ(MustParseUrl("rediss://h").port, 6379);
  EXPECT_THAT(UrlError("rediss://h:6379/1"), HasSubstr("not supported"));
  EXPECT_THAT(UrlError("http://h:6379"), HasSubstr("must start with redis://"));
  EXPECT_THAT(UrlError("127.0.0.1:6379"), HasSubstr("must start with redis://"));
  EXPECT_THAT(UrlError(""), HasSubstr("empty"));
  EXPECT_THAT(UrlError("redis://"), HasSubstr("host is missing"));
  EXPECT_THAT(UrlError("redis://:6379"), HasSubstr("host is missing"));
  EXPECT_THAT(UrlError("redis://h o:6379"), HasSubstr("invalid character"));
  EXPECT_THAT(UrlError("redis://h:6379/2"), HasSubstr("not supported"));
  EXPECT_THAT(UrlError("redis://h:6379?db=1"), HasSubstr("not supported"));
}

TEST(MasterUrl, ErrorsNameTheUrlButNeverThePassword) {
  const std::vector<std::string> bad = {
      "redis://alice:hunter2@h:0",   "redis://:hunter2@:6379",     "rediss://alice:hunter2@h:0",
      "http://alice:hunter2@h:6379", "redis://hunter2@h:0",        "redis://alice:hunter2@h:6379/0",
      "redis://:hunter2@[::1:6379",  "redis://al:hunter2@h:6379,x"};
  for (const std::string& url : bad) {
    const std::string error = UrlError(url);
    EXPECT_THAT(error, Not(HasSubstr("hunter2"))) << url;
    EXPECT_THAT(error, HasSubstr("***")) << url;
  }
  EXPECT_THAT(UrlError("redis://alice:hunter2@h:0"), HasSubstr("redis://alice:***@h:0"));
  EXPECT_THAT(UrlError("redis://alice:@h:1"), HasSubstr("password"));
}

TEST(MasterUrl, AUserAloneTakesTheAgentWidePassword) {
  const MasterAddress m = MustParseUrl("rediss://locker@h:6380");
  EXPECT_EQ(m.user, "locker");
  EXPECT_EQ(m.password, "");
  EXPECT_THAT(UrlError("redis://@h:1"), HasSubstr("user before '@' is empty"));
}

}  // namespace
}  // namespace lw::config_test
