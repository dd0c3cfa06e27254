// Precedence of the sources, and the environment and flag sources.

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

// Precedence and the environment / flag sources.

TEST_F(ConfigFileTest, PrecedenceTomlThenEnvThenFlags) {
  ConfigSources sources;
  sources.toml_path = Write("a.toml",
                            "node_timeout_ms = 10\nkey_prefix = \"toml:\"\nlog_level = \"warn\"\n"
                            "masters = [\"redis://t1:1\", \"redis://t2:2\"]\n");
  EXPECT_EQ(MustLoad(sources).node_timeout_ms, 10);
  EXPECT_EQ(MustLoad(sources).masters.size(), 2u);

  sources.env = {{"LOCKWARDEN_NODE_TIMEOUT_MS", "20"},
                 {"LOCKWARDEN_KEY_PREFIX", "env:"},
                 {"LOCKWARDEN_MASTERS", "redis://e1:1"}};
  Config c = MustLoad(sources);
  EXPECT_EQ(c.node_timeout_ms, 20);
  EXPECT_EQ(c.key_prefix, "env:");
  EXPECT_EQ(c.log_level, "warn");   // from TOML, untouched by env
  ASSERT_EQ(c.masters.size(), 1u);  // a higher source replaces the list
  EXPECT_EQ(c.masters[0].host, "e1");

  sources.flags = {{"node_timeout_ms", {"30"}}, {"masters", {"redis://f1:1", "redis://f2:2"}}};
  c = MustLoad(sources);
  EXPECT_EQ(c.node_timeout_ms, 30);
  EXPECT_EQ(c.key_prefix, "env:");
  ASSERT_EQ(c.masters.size(), 2u);
  EXPECT_EQ(c.masters[1].Display(), "f2:2");
}

TEST(ConfigEnv, ParseErrorsNameTheVariable) {
  struct Case {
    std::string var;
    std::string value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"LOCKWARDEN_NODE_TIMEOUT_MS", "50x", "expected an integer (ms), got \"50x\""},
      {"LOCKWARDEN_NODE_TIMEOUT_MS", "", "expected an integer"},
      {"LOCKWARDEN_NODE_TIMEOUT_MS", " 50", "expected an integer"},
      {"LOCKWARDEN_NODE_TIMEOUT_MS", "1.5", "expected an integer"},
      {"LOCKWARDEN_NODE_TIMEOUT_MS", "30s", "expected an integer"},
      {"LOCKWARDEN_MAX_WAIT_MS", "99999999999999999999", "out of range"},
      {"LOCKWARDEN_MAX_WAIT_MS", "-99999999999999999999", "out of range"},
      {"LOCKWARDEN_DRIFT_FACTOR", "0.1x", "expected a number"},
      {"LOCKWARDEN_DRIFT_FACTOR", "", "expected a number"},
      {"LOCKWARDEN_DRIFT_FACTOR", "nan", "must be a number in [0, 0.5)"},
      {"LOCKWARDEN_DRIFT_FACTOR", "inf", "must be a number in [0, 0.5)"},
  };
  for (const Case& c : cases) {
    ConfigSources sources = WithMasterFlag();
    sources.env[c.var] = c.value;
    const std::string error = LoadError(sources);
    EXPECT_THAT(error, HasSubstr("(env " + c.var + "): ")) << c.value;
    EXPECT_THAT(error, HasSubstr(c.expected)) << c.value;
  }
}

TEST(ConfigEnv, StrictNumbersAreAccepted) {
  ConfigSources sources = WithMasterFlag();
  sources.env = {{"LOCKWARDEN_MAX_WAIT_MS", "0"}, {"LOCKWARDEN_DRIFT_FACTOR", "0.25"}};
  const Config c = MustLoad(sources);
  EXPECT_EQ(c.max_wait_ms, 0);
  EXPECT_DOUBLE_EQ(c.drift_factor, 0.25);
}

TEST(ConfigEnv, UnknownLockwardenVariableIsRefused) {
  ConfigSources sources = WithMasterFlag();
  sources.env = {{"LOCKWARDEN_FOO", "1"}};
  EXPECT_THAT(LoadError(sources), HasSubstr("LOCKWARDEN_FOO"));
  sources.env = {{"LOCKWARDEN_NODE_TIMEOUT", "5"}};
  EXPECT_THAT(LoadError(sources), HasSubstr("did you mean LOCKWARDEN_NODE_TIMEOUT_MS?"));
  sources.env = {{"LOCKWARDEN_node_timeout_ms", "5"}};
  EXPECT_THAT(LoadError(sources), HasSubstr("LOCKWARDEN_node_timeout_ms"));
}

TEST(ConfigEnv, ForeignAndUnrelatedVariablesAreIgnored) {
  ConfigSources sources = WithMasterFlag();
  sources.env = {{"LOCKWARDEN_CONFIG", "/etc/lockwarden.toml"},
                 {"LOCKWARDEN_SOCKET", "relative/is/fine/here"},
                 {"LOCKWARDEN_RESOURCE", "r"},
                 {"LOCKWARDEN_TOKEN", "t"},
                 {"LOCKWARDEN_FENCE", "f"},
                 {"PATH", "/usr/bin"},
                 {"LOCKWARDENX", "1"},
                 {"LOCKWARDEN_SOCKET_PATH", "/tmp/x.sock"}};
  EXPECT_EQ(MustLoad(sources).socket_path, "/tmp/x.sock");
}

TEST(ConfigEnv, MastersCommaList) {
  ConfigSources sources;
  sources.env = {{"LOCKWARDEN_MASTERS", "redis://a:1, redis://:pw@b:2 ,redis://c"}};
  const Config c = MustLoad(sources);
  ASSERT_EQ(c.masters.size(), 3u);
  EXPECT_EQ(c.masters[0].Display(), "a:1");
  EXPECT_EQ(c.masters[1].Display(), "b:2");
  EXPECT_EQ(c.masters[1].password, "pw");
  EXPECT_EQ(c.masters[2].Display(), "c:6379");

  sources.env = {{"LOCKWARDEN_MASTERS", "redis://a:1,,redis://c"}};
  EXPECT_THAT(LoadError(sources), StartsWith("masters (env LOCKWARDEN_MASTERS): entry 2 is empty"));
  sources.env = {{"LOCKWARDEN_MASTERS", ""}};
  EXPECT_THAT(LoadError(sources), StartsWith("masters (env LOCKWARDEN_MASTERS): at least one"));
  sources.env = {{"LOCKWARDEN_MASTERS", "redis://a:1,redis://u:topsecret@b:99999"}};
  const std::string error = LoadError(sources);
  EXPECT_THAT(error, StartsWith("masters (env LOCKWARDEN_MASTERS): "));
  EXPECT_THAT(error, Not(HasSubstr("topsecret")));
}

TEST(ConfigFlags, RepeatedMaster) {
  ConfigSources sources;
  sources.flags["masters"] = {"redis://a:1", "redis://b:2", "redis://c:3"};
  const Config c = MustLoad(sources);
  ASSERT_EQ(c.masters.size(), 3u);
  EXPECT_EQ(c.masters[0].Display(), "a:1");
  EXPECT_EQ(c.masters[2].Display(), "c:3");
}

TEST(ConfigFlags, ErrorsNameTheFlag) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["node_timeout_ms"] = {"fast"};
  EXPECT_THAT(LoadError(sources), StartsWith("node_timeout_ms (flag --node-timeout-ms): "));
  sources.flags["node_timeout_ms"] = {"10", "20"};
  EXPECT_THAT(LoadError(sources), HasSubstr("given 2 times"));
  sources.flags.erase("node_timeout_ms");
  sources.flags["masters"] = {"redis://:pw@h:0"};
  EXPECT_THAT(LoadError(sources), StartsWith("masters (flag --master): "));
  sources.flags = {{"masters", {kLocal}}, {"node_timeout", {"5"}}};
  EXPECT_THAT(LoadError(sources), HasSubstr("did you mean --node-timeout-ms?"));
}

TEST(ConfigFlags, ValidationErrorsNameTheSource) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["node_timeout_ms"] = {"80"};
  EXPECT_THAT(LoadError(sources), StartsWith("node_timeout_ms (flag --node-timeout-ms): is 80"));
  sources.flags.erase("node_timeout_ms");
  sources.env["LOCKWARDEN_MIN_TTL_MS"] = "60";  // now the default node timeout is too large
  EXPECT_THAT(LoadError(sources), StartsWith("node_timeout_ms (default): "));
  sources.env["LOCKWARDEN_MIN_TTL_MS"] = "0";
  EXPECT_THAT(LoadError(sources), StartsWith("min_ttl_ms (env LOCKWARDEN_MIN_TTL_MS): "));
}

TEST(ConfigFlags, DuplicateMasterErrorHidesPassword) {
  ConfigSources sources;
  sources.flags["masters"] = {"redis://:topsecret@h:1", "redis://:topsecret@H:1"};
  const std::string error = LoadError(sources);
  EXPECT_THAT(error, StartsWith("masters (flag --master): "));
  EXPECT_THAT(error, HasSubstr("listed twice"));
  EXPECT_THAT(error, Not(HasSubstr("topsecret")));
}

// ---------------------------------------------------------------------------------------------

}  // namespace
}  // namespace lw::config_test
