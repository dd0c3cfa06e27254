#include "config/config.h"

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

namespace lw {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kLocal[] = "redis://127.0.0.1:6379";

MasterAddress MustParseUrl(const std::string& url) {
  auto parsed = ParseMasterUrl(url);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    ADD_FAILURE() << url << ": " << *error;
    return {};
  }
  return std::get<MasterAddress>(parsed);
}

std::string UrlError(const std::string& url) {
  auto parsed = ParseMasterUrl(url);
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  ADD_FAILURE() << url << " was accepted";
  return "";
}

Config MustLoad(const ConfigSources& sources) {
  auto loaded = LoadConfig(sources);
  if (auto* error = std::get_if<std::string>(&loaded)) {
    ADD_FAILURE() << *error;
    return {};
  }
  return std::get<Config>(loaded);
}

std::string LoadError(const ConfigSources& sources) {
  auto loaded = LoadConfig(sources);
  if (auto* error = std::get_if<std::string>(&loaded)) return *error;
  ADD_FAILURE() << "configuration was accepted";
  return "";
}

// A valid config: the defaults plus one master.
Config ValidConfig() {
  Config config;
  config.masters.push_back(MustParseUrl(kLocal));
  return config;
}

// Sources with one master given by flag, so only the setting under test can fail.
ConfigSources WithMasterFlag() {
  ConfigSources sources;
  sources.flags["masters"] = {kLocal};
  return sources;
}

// Each test gets a fresh mkdtemp directory for its TOML files.
class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "lw_config_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Written 0640, as a config file holding a password must be; `mode` to test other modes.
  std::string Write(const std::string& name, const std::string& contents,
                    std::filesystem::perms mode = std::filesystem::perms::owner_read |
                                                  std::filesystem::perms::owner_write |
                                                  std::filesystem::perms::group_read) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << contents;
    std::filesystem::permissions(path, mode);
    return path;
  }

  std::filesystem::path dir_;
};

// ---------------------------------------------------------------------------------------------
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
  std::string keys;
  for (const SettingInfo& s : Settings()) {
    keys += s.key + " ";
    EXPECT_THAT(s.help, HasSubstr("default")) << s.key;
    if (s.key.ends_with("_ms")) {
      EXPECT_THAT(s.help, HasSubstr("ms")) << s.key;
    }
  }
  EXPECT_EQ(keys,
            "socket_path masters key_prefix fence_prefix fence_quorum restart_quarantine "
            "min_ttl_ms max_ttl_ms default_ttl_ms max_wait_ms "
            "node_timeout_ms connect_timeout_ms drift_factor retry_delay_ms retry_jitter_ms "
            "reconnect_max_backoff_ms health_interval_ms shutdown_grace_ms log_level "
            "max_line_bytes max_connections max_inflight_per_session max_locks_per_session "
            "max_waiters_per_resource idle_timeout_ms max_unsent_bytes socket_mode "
            "socket_owner socket_group access redis_user redis_password_file redis_password "
            "admin_listen admin_token_file stuck_after_ms admin_max_connections "
            "admin_timeout_ms admin_max_body_bytes scan_interval_ms "
            "scan_keys_per_second scan_batch scan_patterns ");
  EXPECT_THAT(Settings()[10].help, HasSubstr("default 50"));
  EXPECT_THAT(Settings()[12].help, HasSubstr("0.01"));
  EXPECT_THAT(Settings()[5].help, HasSubstr("default true"));
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
  c.masters = {MasterAddress{"127.0.0.1", 6379, "", ""}};
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
  for (int i = 0; i < 5; ++i) c.masters.push_back(MasterAddress{"127.0.0.1", 7000 + i, "", ""});
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
  EXPECT_THAT(UrlError("rediss://h:6379"), HasSubstr("hiredis 0.14 has no TLS"));
  EXPECT_THAT(UrlError("rediss://h:6379"), HasSubstr("stunnel"));
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
      "redis://alice:hunter2@h:0",   "redis://:hunter2@:6379",     "rediss://alice:hunter2@h:6379",
      "http://alice:hunter2@h:6379", "redis://hunter2@h:6379",     "redis://alice:hunter2@h:6379/0",
      "redis://:hunter2@[::1:6379",  "redis://al:hunter2@h:6379,x"};
  for (const std::string& url : bad) {
    const std::string error = UrlError(url);
    EXPECT_THAT(error, Not(HasSubstr("hunter2"))) << url;
    EXPECT_THAT(error, HasSubstr("***")) << url;
  }
  EXPECT_THAT(UrlError("redis://alice:hunter2@h:0"), HasSubstr("redis://alice:***@h:0"));
  EXPECT_THAT(UrlError("redis://alice:@h:1"), HasSubstr("password"));
}

// ---------------------------------------------------------------------------------------------
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
// Validation rules: one failing case (at least) per rule, each naming its field.

struct RuleCase {
  std::string name;
  std::function<void(Config&)> mutate;
  std::string key;
  std::string reason;
};

// Each case's change to a valid config is refused with a message naming its key and reason.
void ExpectEachRefused(const std::vector<RuleCase>& cases) {
  for (const RuleCase& rule : cases) {
    Config config = ValidConfig();
    rule.mutate(config);
    const auto error = ValidateConfig(config);
    ASSERT_TRUE(error.has_value()) << rule.name;
    EXPECT_THAT(*error, StartsWith(rule.key + ": ")) << rule.name;
    EXPECT_THAT(*error, HasSubstr(rule.reason)) << rule.name << ": " << *error;
  }
}

TEST(ConfigValidation, EachRuleRefusesAndNamesTheField) {
  const std::vector<RuleCase> cases = {
      {"no masters", [](Config& c) { c.masters.clear(); }, "masters", "at least one"},
      {"duplicate", [](Config& c) { c.masters.push_back(c.masters[0]); }, "masters",
       "listed twice"},
      {"empty host", [](Config& c) { c.masters[0].host = ""; }, "masters", "empty host"},
      {"port 0", [](Config& c) { c.masters[0].port = 0; }, "masters", "port 0"},
      {"empty socket", [](Config& c) { c.socket_path = ""; }, "socket_path", "empty"},
      {"relative socket", [](Config& c) { c.socket_path = "run/x.sock"; }, "socket_path",
       "absolute"},
      {"long socket", [](Config& c) { c.socket_path = "/" + std::string(107, 'a'); }, "socket_path",
       "shorter than 108"},
      {"empty prefix", [](Config& c) { c.key_prefix = ""; }, "key_prefix", "empty"},
      {"long prefix", [](Config& c) { c.key_prefix = std::string(65, 'k'); }, "key_prefix",
       "at most 64"},
      {"space in prefix", [](Config& c) { c.key_prefix = "my lock:"; }, "key_prefix", "whitespace"},
      {"control in prefix", [](Config& c) { c.key_prefix = "a\x01"; }, "key_prefix", "control"},
      {"min ttl 0", [](Config& c) { c.min_ttl_ms = 0; }, "min_ttl_ms", "between 1 ms"},
      {"max ttl > 7d", [](Config& c) { c.max_ttl_ms = 7 * 86'400'000LL + 1; }, "max_ttl_ms",
       "604800000 ms (7 days)"},
      {"min > max", [](Config& c) { c.min_ttl_ms = c.max_ttl_ms + 1; }, "min_ttl_ms",
       "above max_ttl_ms"},
      {"default < min", [](Config& c) { c.default_ttl_ms = 99; }, "default_ttl_ms",
       "outside min_ttl_ms..max_ttl_ms"},
      {"default > max", [](Config& c) { c.default_ttl_ms = c.max_ttl_ms + 1; }, "default_ttl_ms",
       "outside"},
      {"wait < 0", [](Config& c) { c.max_wait_ms = -1; }, "max_wait_ms", "between 0 ms"},
      {"wait > 1d", [](Config& c) { c.max_wait_ms = 86'400'001; }, "max_wait_ms", "(1 day)"},
      {"node timeout 0", [](Config& c) { c.node_timeout_ms = 0; }, "node_timeout_ms",
       "between 1 ms and 10000 ms"},
      {"node timeout > 10s",
       [](Config& c) {
         c.min_ttl_ms = c.default_ttl_ms = 100'000;
         c.max_ttl_ms = 3'600'000;
         c.node_timeout_ms = 10'001;
       },
       "node_timeout_ms", "between 1 ms"},
      {"node timeout vs ttl", [](Config& c) { c.node_timeout_ms = 51; }, "node_timeout_ms",
       "leaves a lock no validity"},
      {"connect timeout 0", [](Config& c) { c.connect_timeout_ms = 0; }, "connect_timeout_ms",
       "between 1 ms"},
      {"connect timeout big", [](Config& c) { c.connect_timeout_ms = 60'001; },
       "connect_timeout_ms", "60000 ms (1 min)"},
      {"drift negative", [](Config& c) { c.drift_factor = -0.01; }, "drift_factor", "[0, 0.5)"},
      {"drift half", [](Config& c) { c.drift_factor = 0.5; }, "drift_factor", "[0, 0.5)"},
      {"drift nan", [](Config& c) { c.drift_factor = std::nan(""); }, "drift_factor", "[0, 0.5)"},
      {"drift inf", [](Config& c) { c.drift_factor = std::numeric_limits<double>::infinity(); },
       "drift_factor", "[0, 0.5)"},
      {"retry delay", [](Config& c) { c.retry_delay_ms = -1; }, "retry_delay_ms", "between 0"},
      {"retry jitter", [](Config& c) { c.retry_jitter_ms = 60'001; }, "retry_jitter_ms",
       "between 0"},
      {"backoff low", [](Config& c) { c.reconnect_max_backoff_ms = 9; }, "reconnect_max_backoff_ms",
       "between 10 ms"},
      {"backoff high", [](Config& c) { c.reconnect_max_backoff_ms = 600'001; },
       "reconnect_max_backoff_ms", "(10 min)"},
      {"health low", [](Config& c) { c.health_interval_ms = 9; }, "health_interval_ms",
       "between 10 ms"},
      {"health high", [](Config& c) { c.health_interval_ms = 60'001; }, "health_interval_ms",
       "between 10 ms"},
      {"grace", [](Config& c) { c.shutdown_grace_ms = -5; }, "shutdown_grace_ms", "got -5"},
      {"log level", [](Config& c) { c.log_level = "verbose"; }, "log_level",
       "\"verbose\" is not one of"},
      {"log level case", [](Config& c) { c.log_level = "INFO"; }, "log_level", "not one of"},
      {"line small", [](Config& c) { c.max_line_bytes = 1023; }, "max_line_bytes",
       "between 1024 bytes"},
      {"line big", [](Config& c) { c.max_line_bytes = 16LL * 1024 * 1024 + 1; }, "max_line_bytes",
       "(16 MiB)"},
  };
  ExpectEachRefused(cases);
}

TEST(ConfigValidation, BoundariesAreAccepted) {
  const std::vector<std::pair<std::string, std::function<void(Config&)>>> cases = {
      {"one master", [](Config&) {}},
      {"two masters (even N is allowed)",
       [](Config& c) { c.masters.push_back(MustParseUrl("redis://127.0.0.1:6380")); }},
      {"node timeout at half the min ttl", [](Config& c) { c.node_timeout_ms = 50; }},
      {"socket path of 107 bytes", [](Config& c) { c.socket_path = "/" + std::string(106, 'a'); }},
      {"prefix of 64 bytes", [](Config& c) { c.key_prefix = std::string(64, 'k'); }},
      {"ttls all equal",
       [](Config& c) { c.min_ttl_ms = c.default_ttl_ms = c.max_ttl_ms = 7 * 86'400'000LL; }},
      {"zeros where allowed",
       [](Config& c) {
         c.max_wait_ms = c.retry_delay_ms = c.retry_jitter_ms = c.shutdown_grace_ms = 0;
         c.drift_factor = 0;
       }},
      {"upper bounds",
       [](Config& c) {
         c.max_wait_ms = 86'400'000;
         c.connect_timeout_ms = c.health_interval_ms = 60'000;
         c.reconnect_max_backoff_ms = 600'000;
         c.max_line_bytes = 16LL * 1024 * 1024;
         c.drift_factor = 0.499;
       }},
      {"lower bounds",
       [](Config& c) {
         c.reconnect_max_backoff_ms = c.health_interval_ms = 10;
         c.max_line_bytes = 1024;
         c.connect_timeout_ms = c.node_timeout_ms = 1;
       }},
      {"same host, different port",
       [](Config& c) { c.masters.push_back(MustParseUrl("redis://127.0.0.1:6380")); }},
  };
  for (const auto& [name, mutate] : cases) {
    Config config = ValidConfig();
    mutate(config);
    EXPECT_EQ(ValidateConfig(config), std::nullopt) << name;
  }
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    Config config = ValidConfig();
    config.log_level = level;
    EXPECT_EQ(ValidateConfig(config), std::nullopt) << level;
  }
}

// ---------------------------------------------------------------------------------------------
// Client limits, socket access, admin bounds: ranges, each naming its field.

TEST(ConfigValidation, LimitsSocketAndAdminRulesRefuseAndNameTheField) {
  const std::vector<RuleCase> cases = {
      {"connections 0", [](Config& c) { c.max_connections = 0; }, "max_connections",
       "between 1 connections and 1000000 connections, got 0"},
      {"connections big", [](Config& c) { c.max_connections = 1'000'001; }, "max_connections",
       "got 1000001"},
      {"inflight 0", [](Config& c) { c.max_inflight_per_session = 0; }, "max_inflight_per_session",
       "between 1 requests and 100000 requests"},
      {"inflight big", [](Config& c) { c.max_inflight_per_session = 100'001; },
       "max_inflight_per_session", "got 100001"},
      {"locks 0", [](Config& c) { c.max_locks_per_session = 0; }, "max_locks_per_session",
       "between 1 locks"},
      {"locks big", [](Config& c) { c.max_locks_per_session = 1'000'001; }, "max_locks_per_session",
       "1000000 locks"},
      {"waiters 0", [](Config& c) { c.max_waiters_per_resource = 0; }, "max_waiters_per_resource",
       "between 1 waiters"},
      {"waiters negative", [](Config& c) { c.max_waiters_per_resource = -1; },
       "max_waiters_per_resource", "got -1"},
      {"idle short", [](Config& c) { c.idle_timeout_ms = 999; }, "idle_timeout_ms",
       "between 1000 ms (1 s) and 604800000 ms (7 days), got 999"},
      {"idle negative", [](Config& c) { c.idle_timeout_ms = -1; }, "idle_timeout_ms", "got -1"},
      {"idle long", [](Config& c) { c.idle_timeout_ms = 7 * 86'400'000LL + 1; }, "idle_timeout_ms",
       "(7 days)"},
      {"unsent small", [](Config& c) { c.max_unsent_bytes = 65'535; }, "max_unsent_bytes",
       "between 65536 bytes and 1073741824 bytes (1024 MiB), got 65535"},
      {"unsent big", [](Config& c) { c.max_unsent_bytes = 1024LL * 1024 * 1024 + 1; },
       "max_unsent_bytes", "(1024 MiB)"},
      {"mode empty", [](Config& c) { c.socket_mode = ""; }, "socket_mode",
       "\"\" is not an octal mode such as 0660"},
      {"mode not octal", [](Config& c) { c.socket_mode = "0668"; }, "socket_mode",
       "\"0668\" is not an octal mode"},
      {"mode symbolic", [](Config& c) { c.socket_mode = "rw-rw----"; }, "socket_mode",
       "not an octal mode"},
      {"mode setuid", [](Config& c) { c.socket_mode = "4660"; }, "socket_mode",
       "\"4660\" is not an octal mode"},
      {"mode too long", [](Config& c) { c.socket_mode = "00660"; }, "socket_mode",
       "not an octal mode"},
      {"mode too short", [](Config& c) { c.socket_mode = "66"; }, "socket_mode",
       "not an octal mode"},
      {"mode 0o", [](Config& c) { c.socket_mode = "0o660"; }, "socket_mode", "not an octal mode"},
      {"mode sign", [](Config& c) { c.socket_mode = "-660"; }, "socket_mode", "not an octal mode"},
      {"mode owner read only", [](Config& c) { c.socket_mode = "0460"; }, "socket_mode",
       "0460 does not let the owner read and write the socket"},
      {"mode group only", [](Config& c) { c.socket_mode = "0060"; }, "socket_mode",
       "does not let the owner"},
      {"owner with blank", [](Config& c) { c.socket_owner = "lock warden"; }, "socket_owner",
       "\"lock warden\" is not a user/group name or number"},
      {"owner with colon", [](Config& c) { c.socket_owner = "root:root"; }, "socket_owner",
       "not a user/group name"},
      {"group with control", [](Config& c) { c.socket_group = "ops\x01"; }, "socket_group",
       "not a user/group name"},
      {"access bad who",
       [](Config& c) {
         c.access = {"uid:1 a:", "alice *"};
       },
       "access", "rule 2 (\"alice *\"): \"alice\" is not uid:N"},
      {"access no prefix", [](Config& c) { c.access = {"group:ops"}; }, "access",
       "rule 1 (\"group:ops\"): expected"},
      {"access glob", [](Config& c) { c.access = {"any orders:*"}; }, "access",
       "prefixes are literal"},
      {"stuck short", [](Config& c) { c.stuck_after_ms = 999; }, "stuck_after_ms",
       "between 1000 ms"},
      {"admin conns 0", [](Config& c) { c.admin_max_connections = 0; }, "admin_max_connections",
       "between 1 connections and 10000 connections, got 0"},
      {"admin conns big", [](Config& c) { c.admin_max_connections = 10'001; },
       "admin_max_connections", "got 10001"},
      {"admin timeout short", [](Config& c) { c.admin_timeout_ms = 99; }, "admin_timeout_ms",
       "between 100 ms and 600000 ms (10 min), got 99"},
      {"admin timeout long", [](Config& c) { c.admin_timeout_ms = 600'001; }, "admin_timeout_ms",
       "got 600001"},
      {"admin body small", [](Config& c) { c.admin_max_body_bytes = 1023; }, "admin_max_body_bytes",
       "between 1024 bytes and 16777216 bytes (16 MiB), got 1023"},
      {"admin body big", [](Config& c) { c.admin_max_body_bytes = 16LL * 1024 * 1024 + 1; },
       "admin_max_body_bytes", "(16 MiB)"},
      {"admin beyond loopback", [](Config& c) { c.admin_listen = "0.0.0.0:9477"; }, "admin_listen",
       "0.0.0.0:9477 is reachable beyond this host"},
      {"redis user blank", [](Config& c) { c.redis_user = "lock warden"; }, "redis_user",
       "\"lock warden\" is not a usable ACL user name"},
      {"password file relative", [](Config& c) { c.redis_password_file = "etc/pw"; },
       "redis_password_file", "must be an absolute path"},
      {"password file and password",
       [](Config& c) {
         c.redis_password_file = "/etc/lockwarden/redis.pw";
         c.redis_password = "x";
       },
       "redis_password_file", "and redis_password are both set; give one"},
      {"password line break", [](Config& c) { c.redis_password = "a\nb"; }, "redis_password",
       "must not contain a line break"},
      {"password carriage return", [](Config& c) { c.redis_password = "a\r"; }, "redis_password",
       "line break"},
  };
  ExpectEachRefused(cases);
}

TEST(ConfigValidation, LimitsSocketAndAdminBoundariesAreAccepted) {
  const std::vector<std::pair<std::string, std::function<void(Config&)>>> cases = {
      {"lower bounds",
       [](Config& c) {
         c.max_connections = c.max_inflight_per_session = c.max_locks_per_session =
             c.max_waiters_per_resource = c.admin_max_connections = 1;
         c.idle_timeout_ms = 1000;
         c.max_unsent_bytes = 65'536;
         c.admin_timeout_ms = 100;
         c.admin_max_body_bytes = 1024;
       }},
      {"upper bounds",
       [](Config& c) {
         c.max_connections = c.max_locks_per_session = c.max_waiters_per_resource = 1'000'000;
         c.max_inflight_per_session = 100'000;
         c.idle_timeout_ms = 7 * 86'400'000LL;
         c.max_unsent_bytes = 1024LL * 1024 * 1024;
         c.admin_max_connections = 10'000;
         c.admin_timeout_ms = 600'000;
         c.admin_max_body_bytes = 16LL * 1024 * 1024;
       }},
      {"idle timeout off", [](Config& c) { c.idle_timeout_ms = 0; }},
      {"owner and group as names",
       [](Config& c) {
         c.socket_owner = "lockwarden";
         c.socket_group = "lockwarden-clients";
       }},
      {"owner and group as numbers",
       [](Config& c) {
         c.socket_owner = "0";
         c.socket_group = "65534";
       }},
      {"access rules of every kind",
       [](Config& c) {
         c.access = {"uid:1000 orders/", "gid:50 jobs:", "user:alice *", "group:ops a b",
                     "any public:"};
       }},
      {"admin on loopback without token", [](Config& c) { c.admin_listen = "127.0.0.2:1"; }},
      {"admin on localhost", [](Config& c) { c.admin_listen = "localhost:9477"; }},
      {"admin on ::1", [](Config& c) { c.admin_listen = "[::1]:9477"; }},
      {"admin off", [](Config& c) { c.admin_listen = "off"; }},
      {"admin beyond loopback with a token file",
       [](Config& c) {
         c.admin_listen = "0.0.0.0:9477";
         c.admin_token_file = "/etc/lockwarden/admin.token";
       }},
      {"redis user and password",
       [](Config& c) {
         c.redis_user = "lockwarden";
         c.redis_password = "s3cret with blanks";
       }},
      {"redis password file", [](Config& c) { c.redis_password_file = "/etc/lw/redis.pw"; }},
  };
  for (const auto& [name, mutate] : cases) {
    Config config = ValidConfig();
    mutate(config);
    EXPECT_EQ(ValidateConfig(config), std::nullopt) << name;
  }
}

TEST(ConfigSocketMode, OctalModesThatLetTheOwnerReadAndWrite) {
  for (const char* mode : {"0660", "660", "0600", "600", "0700", "0777", "0666", "0620"}) {
    Config config = ValidConfig();
    config.socket_mode = mode;
    EXPECT_EQ(ValidateConfig(config), std::nullopt) << mode;
  }
  EXPECT_EQ(Config{}.socket_mode, "0660");
}

TEST(ConfigAdmin, ListenBeyondLoopbackNeedsTheTokenFile) {
  for (const char* listen :
       {"0.0.0.0:9477", "[::]:9477", "10.1.2.3:9477", "[::ffff:127.0.0.1]:1"}) {
    ConfigSources sources = WithMasterFlag();
    sources.env["LOCKWARDEN_ADMIN_LISTEN"] = listen;
    const std::string error = LoadError(sources);
    EXPECT_THAT(error, StartsWith("admin_listen (env LOCKWARDEN_ADMIN_LISTEN): ")) << listen;
    EXPECT_THAT(error, HasSubstr("set admin_token_file too")) << listen;
    sources.flags["admin_token_file"] = {"/etc/lockwarden/admin.token"};
    EXPECT_EQ(MustLoad(sources).admin_listen, listen);
  }
}

// Each new setting's value errors name the source: flag, environment variable, file and line.
TEST_F(ConfigFileTest, LimitsAndSocketErrorsNameTheSource) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["max_connections"] = {"0"};
  EXPECT_THAT(LoadError(sources), StartsWith("max_connections (flag --max-connections): must be"));
  sources.flags["max_connections"] = {"many"};
  EXPECT_THAT(LoadError(sources),
              StartsWith("max_connections (flag --max-connections): expected an integer "
                         "(connections), got \"many\""));
  sources.flags.erase("max_connections");
  sources.env["LOCKWARDEN_SOCKET_MODE"] = "0999";
  EXPECT_THAT(LoadError(sources),
              StartsWith("socket_mode (env LOCKWARDEN_SOCKET_MODE): \"0999\" is not an octal"));
  sources.env.clear();
  sources.env["LOCKWARDEN_IDLE_TIMEOUT_MS"] = "10";
  EXPECT_THAT(LoadError(sources), StartsWith("idle_timeout_ms (env LOCKWARDEN_IDLE_TIMEOUT_MS): "));
  sources.env.clear();
  sources.toml_path = Write("a.toml", "max_locks_per_session = 10\nsocket_mode = 660\n");
  EXPECT_THAT(LoadError(sources),
              StartsWith("socket_mode (" + *sources.toml_path + ":2): expected a string"));
  sources.toml_path = Write("b.toml", "\n\nadmin_timeout_ms = 5\n");
  EXPECT_THAT(LoadError(sources),
              StartsWith("admin_timeout_ms (" + *sources.toml_path + ":3): must be between 100"));
  sources.toml_path = Write("c.toml", "access = \"any *\"\n");
  EXPECT_THAT(LoadError(sources),
              StartsWith("access (" + *sources.toml_path + ":1): expected an array of strings"));
}

TEST_F(ConfigFileTest, LoadsLimitsSocketAccessCredentialsAndAdminBounds) {
  const std::string path = Write("lockwarden.toml", R"(masters = ["redis://10.0.0.1:6379"]
max_connections = 100
max_inflight_per_session = 8
max_locks_per_session = 16
max_waiters_per_resource = 32
idle_timeout_ms = 0
max_unsent_bytes = 131072
socket_mode = "0600"
socket_owner = "lockwarden"
socket_group = "1234"
access = ["user:alice orders/", "group:ops *"]
redis_user = "lockwarden"
redis_password = "from-the-file"
admin_listen = "0.0.0.0:9477"
admin_token_file = "/etc/lockwarden/admin.token"
admin_max_connections = 4
admin_timeout_ms = 2000
admin_max_body_bytes = 4096
)");
  ConfigSources sources;
  sources.toml_path = path;
  const Config c = MustLoad(sources);
  EXPECT_EQ(c.max_connections, 100);
  EXPECT_EQ(c.max_inflight_per_session, 8);
  EXPECT_EQ(c.max_locks_per_session, 16);
  EXPECT_EQ(c.max_waiters_per_resource, 32);
  EXPECT_EQ(c.idle_timeout_ms, 0);
  EXPECT_EQ(c.max_unsent_bytes, 131072);
  EXPECT_EQ(c.socket_mode, "0600");
  EXPECT_EQ(c.socket_owner, "lockwarden");
  EXPECT_EQ(c.socket_group, "1234");
  EXPECT_EQ(c.access, (std::vector<std::string>{"user:alice orders/", "group:ops *"}));
  EXPECT_EQ(c.admin_listen, "0.0.0.0:9477");
  EXPECT_EQ(c.admin_max_connections, 4);
  EXPECT_EQ(c.admin_timeout_ms, 2000);
  EXPECT_EQ(c.admin_max_body_bytes, 4096);
  ASSERT_EQ(c.masters.size(), 1u);
  EXPECT_EQ(c.masters[0].user, "lockwarden");
  EXPECT_EQ(c.masters[0].password, "from-the-file");
}

TEST(ConfigAccess, RulesFromRepeatedFlagsOrAnEnvListAndErrorsNameTheRule) {
  EXPECT_EQ(FlagFor("access"), "--access");
  bool repeatable = false;
  for (const auto& s : Settings()) repeatable = repeatable || (s.key == "access" && s.repeatable);
  EXPECT_TRUE(repeatable);

  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_ACCESS"] = "user:alice orders/, group:ops *";
  EXPECT_EQ(MustLoad(sources).access,
            (std::vector<std::string>{"user:alice orders/", "group:ops *"}));
  sources.flags["access"] = {"uid:1000 a:", "any b:"};
  EXPECT_EQ(MustLoad(sources).access, (std::vector<std::string>{"uid:1000 a:", "any b:"}));
  sources.flags["access"] = {"uid:1000 a:", "uid:x b:"};
  EXPECT_EQ(LoadError(sources),
            "access (flag --access): rule 2 (\"uid:x b:\"): \"x\" is not a number in uid:x");
  sources.flags["access"] = {"uid:1000 a:", ""};
  EXPECT_THAT(LoadError(sources), StartsWith("access (flag --access): entry 2 is empty"));
  sources.flags.erase("access");
  sources.env["LOCKWARDEN_ACCESS"] = "any";
  EXPECT_THAT(LoadError(sources), StartsWith("access (env LOCKWARDEN_ACCESS): rule 1 (\"any\")"));
  // Names are checked for shape here and resolved when the agent starts (core/access).
  sources.env["LOCKWARDEN_ACCESS"] = "user:no-such-user-anywhere *";
  EXPECT_EQ(MustLoad(sources).access.size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Redis credentials: merged into each master whose URL has none.

constexpr char kPasswordFlag[] = "hunter2-on-the-command-line";

TEST(ConfigCredentials, UrlCredentialsWinAndTheOthersGetTheAgentWideOnes) {
  ConfigSources sources;
  sources.flags["masters"] = {"redis://owner:url-pw@a:1", "redis://b:2", "redis://:url-only@c:3"};
  sources.flags["redis_user"] = {"lockwarden"};
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-pw";
  const Config c = MustLoad(sources);
  ASSERT_EQ(c.masters.size(), 3u);
  EXPECT_EQ(c.masters[0].user, "owner");
  EXPECT_EQ(c.masters[0].password, "url-pw");
  EXPECT_EQ(c.masters[1].user, "lockwarden");
  EXPECT_EQ(c.masters[1].password, "env-pw");
  EXPECT_EQ(c.masters[2].user, "") << "a URL with a password alone keeps AUTH <password>";
  EXPECT_EQ(c.masters[2].password, "url-only");
  EXPECT_EQ(c.redis_password, "env-pw");
}

TEST(ConfigCredentials, APasswordWithoutUserIsAuthWithThePasswordOnly) {
  ConfigSources sources;
  sources.flags["masters"] = {"redis://a:1", "redis://b:2"};
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-pw";
  const Config c = MustLoad(sources);
  for (const MasterAddress& m : c.masters) {
    EXPECT_EQ(m.user, "");
    EXPECT_EQ(m.password, "env-pw");
  }
}

TEST(ConfigCredentials, NoCredentialsLeavesMastersAlone) {
  const Config c = MustLoad(WithMasterFlag());
  EXPECT_EQ(c.masters[0].user, "");
  EXPECT_EQ(c.masters[0].password, "");
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "";  // set but empty: no AUTH
  EXPECT_EQ(MustLoad(sources).masters[0].password, "");
}

TEST(ConfigCredentials, AUserWithoutAPasswordIsRefused) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["redis_user"] = {"lockwarden"};
  EXPECT_EQ(LoadError(sources),
            "redis_user (flag --redis-user): an ACL user needs a password: set "
            "redis_password_file or LOCKWARDEN_REDIS_PASSWORD");
  sources.flags.erase("redis_user");
  sources.env["LOCKWARDEN_REDIS_USER"] = "lockwarden";
  EXPECT_THAT(LoadError(sources), StartsWith("redis_user (env LOCKWARDEN_REDIS_USER): "));
}

TEST(ConfigCredentials, ThePasswordFlagIsRefusedWithoutEchoingIt) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["redis_password"] = {kPasswordFlag};
  const std::string error = LoadError(sources);
  EXPECT_THAT(error, StartsWith("redis_password (flag --redis-password): a password on the "
                                "command line is visible to every user of the host"));
  EXPECT_THAT(error, HasSubstr("use LOCKWARDEN_REDIS_PASSWORD or redis_password_file"));
  EXPECT_THAT(error, Not(HasSubstr(kPasswordFlag)));
  EXPECT_EQ(FlagFor("redis_password"), "--redis-password");
  for (const SettingInfo& s : Settings()) {
    if (s.key == "redis_password") {
      EXPECT_THAT(s.help, HasSubstr("never a flag"));
    }
  }
}

TEST(ConfigCredentials, TheEnvironmentPasswordIsUsed) {
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "p@ss word:with/odd,chars";
  const Config c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].password, "p@ss word:with/odd,chars") << "taken whole, never split";
}

TEST(ConfigCredentials, ALineBreakInThePasswordIsRefusedWithoutEchoingIt) {
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "first-half-secret\nsecond";
  const std::string error = LoadError(sources);
  EXPECT_EQ(error, "redis_password (env LOCKWARDEN_REDIS_PASSWORD): must not contain a line break");
}

// The password file, as written by the tests: mode 0600 unless told.
const std::filesystem::perms k0600 =
    std::filesystem::perms::owner_read | std::filesystem::perms::owner_write;
const std::filesystem::perms k0640 = k0600 | std::filesystem::perms::group_read;
const std::filesystem::perms k0644 = k0640 | std::filesystem::perms::others_read;

TEST_F(ConfigFileTest, PasswordFileGivesItsFirstLineWithoutTheLineEnding) {
  struct Case {
    std::string contents;
    std::string password;
  };
  const std::vector<Case> cases = {
      {"s3cret\n", "s3cret"},
      {"s3cret", "s3cret"},
      {"s3cret\r\n", "s3cret"},
      {"s3cret\r\nsecond line\n", "s3cret"},
      {"with blanks inside \n", "with blanks inside "},
      {std::string(5000, 'x') + "\n", std::string(5000, 'x')},
  };
  for (const Case& c : cases) {
    ConfigSources sources = WithMasterFlag();
    sources.flags["redis_password_file"] = {Write("redis.pw", c.contents, k0600)};
    const Config config = MustLoad(sources);
    const std::string& got = config.masters[0].password;
    EXPECT_TRUE(got == c.password) << "got " << got.size() << " bytes \"" << got.substr(0, 40)
                                   << "\", want " << c.password.size() << " bytes";
    EXPECT_EQ(config.masters[0].user, "");
  }
  ConfigSources sources = WithMasterFlag();
  sources.env["LOCKWARDEN_REDIS_PASSWORD_FILE"] = Write("group.pw", "grp\n", k0640);
  sources.env["LOCKWARDEN_REDIS_USER"] = "lockwarden";
  const Config config = MustLoad(sources);
  EXPECT_EQ(config.masters[0].password, "grp") << "0640 is fine";
  EXPECT_EQ(config.masters[0].user, "lockwarden");
  EXPECT_EQ(ValidateConfig(config), std::nullopt) << "a loaded config validates again";
}

TEST_F(ConfigFileTest, PasswordFileRefusals) {
  ConfigSources sources = WithMasterFlag();
  auto error_for = [&](const std::string& path) {
    sources.flags["redis_password_file"] = {path};
    return LoadError(sources);
  };
  const std::string readable = Write("readable.pw", "world-readable-secret\n", k0644);
  EXPECT_EQ(error_for(readable), "redis_password_file (flag --redis-password-file): " + readable +
                                     " may be read by every user of the host; chmod o-r it "
                                     "(e.g. 0640)");
  const std::string empty = Write("empty.pw", "", k0600);
  EXPECT_EQ(error_for(empty), "redis_password_file (flag --redis-password-file): " + empty +
                                  ": the first line is empty");
  EXPECT_THAT(error_for(Write("blank-first.pw", "\nsecond-line-secret\n", k0600)),
              HasSubstr("the first line is empty"));
  EXPECT_THAT(error_for(Write("crlf-only.pw", "\r\n", k0600)),
              HasSubstr("the first line is empty"));
  const std::string missing = (dir_ / "missing.pw").string();
  EXPECT_EQ(error_for(missing), "redis_password_file (flag --redis-password-file): cannot read " +
                                    missing + ": No such file or directory");
  EXPECT_THAT(error_for(dir_.string()), HasSubstr(dir_.string() + " is not a regular file"));
  EXPECT_THAT(error_for("relative/redis.pw"),
              StartsWith("redis_password_file (flag --redis-password-file): must be an absolute"));
  // Given both ways: refused, whatever the sources.
  sources.flags["redis_password_file"] = {Write("ok.pw", "file-secret\n", k0600)};
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-secret";
  const std::string both = LoadError(sources);
  EXPECT_THAT(both, StartsWith("redis_password_file (flag --redis-password-file): and "
                               "redis_password are both set; give one"));
  EXPECT_THAT(both, Not(HasSubstr("env-secret")));
  EXPECT_THAT(both, Not(HasSubstr("file-secret")));
}

TEST_F(ConfigFileTest, PasswordFileErrorsNeverShowItsContents) {
  ConfigSources sources = WithMasterFlag();
  sources.flags["redis_password_file"] = {Write("readable.pw", "do-not-show-me\n", k0644)};
  EXPECT_THAT(LoadError(sources), Not(HasSubstr("do-not-show-me")));
}

// ---------------------------------------------------------------------------------------------
// A TOML file holding a password must not be readable by every user.

TEST_F(ConfigFileTest, WorldReadableTomlWithAPasswordIsRefused) {
  const std::vector<std::string> secret_files = {
      "masters = [\"redis://10.0.0.1:6379\", \"redis://:url-secret@10.0.0.2:6379\"]\n",
      "masters = [\"redis://10.0.0.1:6379\"]\nredis_password = \"toml-secret\"\n",
      "masters = [\"redis://alice:url-secret@10.0.0.1:6379\"]\n",
  };
  for (const std::string& contents : secret_files) {
    ConfigSources sources;
    sources.toml_path = Write("lockwarden.toml", contents, k0644);
    const std::string error = LoadError(sources);
    EXPECT_EQ(error, "config file " + *sources.toml_path +
                         " holds a Redis password and may be read by every user of the host; "
                         "chmod o-r it (e.g. 0640)")
        << contents;
    EXPECT_THAT(error, Not(HasSubstr("secret@"))) << contents;
    EXPECT_THAT(error, Not(HasSubstr("toml-secret"))) << contents;
    for (auto mode : {k0640, k0600}) {
      sources.toml_path = Write("lockwarden.toml", contents, mode);
      EXPECT_FALSE(MustLoad(sources).masters.empty()) << contents;
    }
  }
}

TEST_F(ConfigFileTest, WorldReadableTomlWithoutAPasswordIsFine) {
  ConfigSources sources;
  sources.toml_path = Write("lockwarden.toml",
                            "masters = [\"redis://10.0.0.1:6379\"]\nredis_user = \"lockwarden\"\n"
                            "redis_password_file = \"" +
                                Write("redis.pw", "pw\n", k0600) + "\"\n",
                            k0644);
  const Config c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].user, "lockwarden");
  EXPECT_EQ(c.masters[0].password, "pw");
  sources.toml_path = Write("plain.toml", "masters = [\"redis://10.0.0.1:6379\"]\n", k0644);
  EXPECT_EQ(MustLoad(sources).masters.size(), 1u);
  sources.toml_path =
      Write("empty-pw.toml", "masters = [\"redis://h:1\"]\nredis_password = \"\"\n", k0644);
  EXPECT_EQ(MustLoad(sources).masters[0].password, "");
}

// The file is readable whatever overrides its values: a password in it is exposed all the same.
TEST_F(ConfigFileTest, WorldReadableTomlWithAPasswordIsRefusedEvenWhenOverridden) {
  ConfigSources sources;
  sources.toml_path = Write("lockwarden.toml",
                            "masters = [\"redis://:url-secret@10.0.0.2:6379\"]\n"
                            "redis_password = \"toml-secret\"\n",
                            k0644);
  sources.env["LOCKWARDEN_MASTERS"] = "redis://10.0.0.3:6379";
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-secret";
  EXPECT_THAT(LoadError(sources), HasSubstr("holds a Redis password"));
}

TEST_F(ConfigFileTest, TomlPasswordIsAppliedLikeTheEnvironmentOne) {
  ConfigSources sources;
  sources.toml_path = Write("lockwarden.toml",
                            "masters = [\"redis://a:1\", \"redis://u:own@b:2\"]\n"
                            "redis_user = \"lockwarden\"\nredis_password = \"toml-pw\"\n");
  Config c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].user, "lockwarden");
  EXPECT_EQ(c.masters[0].password, "toml-pw");
  EXPECT_EQ(c.masters[1].user, "u");
  EXPECT_EQ(c.masters[1].password, "own");
  // The environment overrides the file, as for every setting.
  sources.env["LOCKWARDEN_REDIS_PASSWORD"] = "env-pw";
  c = MustLoad(sources);
  EXPECT_EQ(c.masters[0].password, "env-pw");
}

}  // namespace
}  // namespace lw
