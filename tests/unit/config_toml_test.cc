// The TOML file source: every setting, types, unknown keys, syntax errors, file and line in errors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>

#include "config/config.h"
#include "unit/config_fixture.h"

namespace lw::config_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// TOML file.

TEST_F(ConfigFileTest, LoadsEverySetting) {
  const std::string path = Write("lockwarden.toml", R"(# lockwarden agent
socket_path = "/tmp/lw.sock"
masters = [
  "redis://10.0.0.1:6379",
  "redis://:pw@10.0.0.2:6380",
  "redis://10.0.0.3",
]
key_prefix = "app:lock:"
min_ttl_ms = 200
max_ttl_ms = 60000
default_ttl_ms = 10000
max_wait_ms = 0
node_timeout_ms = 20
connect_timeout_ms = 500
drift_factor = 0.02
retry_delay_ms = 10
retry_jitter_ms = 0
reconnect_max_backoff_ms = 5000
health_interval_ms = 250
shutdown_grace_ms = 0
log_level = "debug"
max_line_bytes = 4096
admin_listen = "[::1]:9500"
admin_token_file = "/etc/lockwarden/token"
scan_interval_ms = 0
scan_keys_per_second = 500
scan_batch = 50
scan_patterns = ["*", "session:*"]
)");
  ConfigSources sources;
  sources.toml_path = path;
  const Config c = MustLoad(sources);
  EXPECT_EQ(c.socket_path, "/tmp/lw.sock");
  ASSERT_EQ(c.masters.size(), 3u);
  EXPECT_EQ(c.masters[1].Display(), "10.0.0.2:6380");
  EXPECT_EQ(c.masters[1].password, "pw");
  EXPECT_EQ(c.masters[2].port, 6379);
  EXPECT_EQ(c.key_prefix, "app:lock:");
  EXPECT_EQ(c.min_ttl_ms, 200);
  EXPECT_EQ(c.max_ttl_ms, 60000);
  EXPECT_EQ(c.default_ttl_ms, 10000);
  EXPECT_EQ(c.max_wait_ms, 0);
  EXPECT_EQ(c.node_timeout_ms, 20);
  EXPECT_EQ(c.connect_timeout_ms, 500);
  EXPECT_DOUBLE_EQ(c.drift_factor, 0.02);
  EXPECT_EQ(c.retry_delay_ms, 10);
  EXPECT_EQ(c.retry_jitter_ms, 0);
  EXPECT_EQ(c.reconnect_max_backoff_ms, 5000);
  EXPECT_EQ(c.health_interval_ms, 250);
  EXPECT_EQ(c.shutdown_grace_ms, 0);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.max_line_bytes, 4096);
  EXPECT_EQ(c.admin_listen, "[::1]:9500");
  EXPECT_EQ(c.admin_token_file, "/etc/lockwarden/token");
  EXPECT_EQ(c.scan_interval_ms, 0);
  EXPECT_EQ(c.scan_keys_per_second, 500);
  EXPECT_EQ(c.scan_batch, 50);
  EXPECT_EQ(c.scan_patterns, (std::vector<std::string>{"*", "session:*"}));
}

TEST(ConfigLists, ScanPatternsFromEnvAndRepeatedFlags) {
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_SCAN_PATTERNS"] = "a:*, b:*";
  EXPECT_EQ(MustLoad(sources).scan_patterns, (std::vector<std::string>{"a:*", "b:*"}));
  sources.flags["scan_patterns"] = {"x*", "y*", "z*"};
  EXPECT_EQ(MustLoad(sources).scan_patterns, (std::vector<std::string>{"x*", "y*", "z*"}));
  EXPECT_EQ(FlagFor("scan_patterns"), "--scan-pattern");
  bool repeatable = false;
  for (const auto& s : Settings()) repeatable = repeatable || (s.key == "scan_patterns" && s.repeatable);
  EXPECT_TRUE(repeatable);
}

TEST(ConfigLists, TomlListOfWrongTypeNamesTheEntry) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["scan_patterns"] = {"ok*", ""};
  EXPECT_THAT(LoadError(sources), HasSubstr("entry 2 is empty"));
}

TEST(ConfigValidation, AdminAndScannerSettings) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["admin_listen"] = {"example.com:80"};
  EXPECT_THAT(LoadError(sources), StartsWith("admin_listen (flag --admin-listen): host"));
  sources.flags["admin_listen"] = {"off"};
  sources.flags["admin_token_file"] = {"relative/token"};
  EXPECT_THAT(LoadError(sources), HasSubstr("absolute path"));
  sources.flags.erase("admin_token_file");
  sources.flags["stuck_after_ms"] = {"999"};
  EXPECT_THAT(LoadError(sources), StartsWith("stuck_after_ms (flag --stuck-after-ms)"));
  sources.flags["stuck_after_ms"] = {"60000"};
  EXPECT_EQ(MustLoad(sources).stuck_after_ms, 60'000);
  sources.flags["scan_interval_ms"] = {"50"};
  EXPECT_THAT(LoadError(sources), StartsWith("scan_interval_ms (flag --scan-interval-ms)"));
  sources.flags["scan_interval_ms"] = {"0"};
  EXPECT_EQ(MustLoad(sources).scan_interval_ms, 0);
  sources.flags["scan_batch"] = {"0"};
  EXPECT_THAT(LoadError(sources), StartsWith("scan_batch"));
}

TEST_F(ConfigFileTest, IntegerDriftFactorIsAccepted) {
  ConfigSources sources = WithMasterFlag();
  sources.toml_path = Write("a.toml", "drift_factor = 0\n");
  EXPECT_EQ(MustLoad(sources).drift_factor, 0.0);
}

TEST_F(ConfigFileTest, UnknownKeyNamesLineAndSuggests) {
  ConfigSources sources = WithMasterFlag();
  sources.toml_path =
      Write("lockwarden.toml", "# comment\nkey_prefix = \"x:\"\nnode_timeout = 5\n");
  EXPECT_EQ(LoadError(sources), "unknown setting \"node_timeout\" at " + *sources.toml_path +
                                    ":3; did you mean node_timeout_ms?");
  sources.toml_path = Write("b.toml", "log_levle = \"info\"\n");
  EXPECT_THAT(LoadError(sources), HasSubstr("did you mean log_level?"));
  sources.toml_path = Write("c.toml", "[redis]\nhost = \"x\"\n");
  EXPECT_THAT(LoadError(sources),
              HasSubstr("unknown setting \"redis\" at " + *sources.toml_path + ":1"));
}

TEST_F(ConfigFileTest, FirstProblemInFileOrderIsReported) {
  ConfigSources sources = WithMasterFlag();
  sources.toml_path = Write("a.toml", "zzz = 1\naaa = 2\n");  // the table itself sorts by key
  EXPECT_THAT(LoadError(sources), HasSubstr("\"zzz\" at " + *sources.toml_path + ":1"));
}

TEST_F(ConfigFileTest, WrongTypesNameKeyLineAndExpectedType) {
  struct Case {
    std::string toml;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"\nnode_timeout_ms = \"50\"\n",
       "node_timeout_ms (%:2): expected an integer (ms), got a string"},
      {"max_line_bytes = 1.5\n", "max_line_bytes (%:1): expected an integer (bytes), got a float"},
      {"drift_factor = \"0.1\"\n", "drift_factor (%:1): expected a number, got a string"},
      {"log_level = 3\n", "log_level (%:1): expected a string, got an integer"},
      {"socket_path = true\n", "socket_path (%:1): expected a string, got a boolean"},
      {"masters = \"redis://h:1\"\n", "masters (%:1): expected an array of strings"},
      {"masters = [\"redis://h:1\", 2]\n", "masters (%:1): entry 2: expected a string"},
      {"masters = [\"redis://:pw@h:0\"]\n", "masters (%:1): master URL \"redis://:***@h:0\""},
  };
  for (const Case& c : cases) {
    ConfigSources sources;
    sources.toml_path = Write("t.toml", c.toml);
    std::string expected = c.expected;
    expected.replace(expected.find('%'), 1, *sources.toml_path);
    EXPECT_THAT(LoadError(sources), StartsWith(expected)) << c.toml;
  }
}

TEST_F(ConfigFileTest, SyntaxErrorAndMissingFile) {
  ConfigSources sources = WithMasterFlag();
  sources.toml_path = Write("bad.toml", "min_ttl_ms = 100\nmax_ttl_ms = \n");
  EXPECT_THAT(LoadError(sources), HasSubstr(*sources.toml_path + ":2:"));
  sources.toml_path = (dir_ / "missing.toml").string();
  EXPECT_EQ(LoadError(sources),
            "config file " + *sources.toml_path + ": cannot open: No such file or directory");
  sources.toml_path = dir_.string();
  EXPECT_EQ(LoadError(sources), "config file " + dir_.string() + ": is a directory");
  sources.toml_path = "";
  EXPECT_THAT(LoadError(sources), HasSubstr("empty"));
}

TEST_F(ConfigFileTest, ValidationErrorNamesFileAndLine) {
  ConfigSources sources = WithMasterFlag();
  sources.toml_path = Write("a.toml", "min_ttl_ms = 100\nnode_timeout_ms = 0\n");
  EXPECT_THAT(LoadError(sources), StartsWith("node_timeout_ms (" + *sources.toml_path + ":2): "));
}

// ---------------------------------------------------------------------------------------------

}  // namespace
}  // namespace lw::config_test
