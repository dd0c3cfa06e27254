// Config defaults, the settings table (keys, help lines, env and flag names) and master URLs.

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
            "reconnect_max_backoff_ms health_interval_ms election_poll_ms shutdown_grace_ms log_level "
            "max_line_bytes max_connections max_inflight_per_session max_locks_per_session "
            "max_waiters_per_resource max_observations_per_session idle_timeout_ms max_unsent_bytes socket_mode "
            "socket_owner socket_group access redis_user redis_password_file redis_password "
            "admin_listen admin_token_file stuck_after_ms admin_max_connections "
            "admin_timeout_ms admin_max_body_bytes agent_name heartbeat_ttl_ms share_cmdline "
            "fleet_refresh_ms admin_url scan_interval_ms "
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

}  // namespace
}  // namespace lw::config_test
