// Client limits, socket access and admin bounds: ranges, each naming its field and its source.

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
      {"observations 0", [](Config& c) { c.max_observations_per_session = 0; },
       "max_observations_per_session", "between 1 elections"},
      {"observations big", [](Config& c) { c.max_observations_per_session = 100'001; },
       "max_observations_per_session", "got 100001"},
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
             c.max_waiters_per_resource = c.admin_max_connections =
                 c.max_observations_per_session = 1;
         c.idle_timeout_ms = 1000;
         c.max_unsent_bytes = 65'536;
         c.admin_timeout_ms = 100;
         c.admin_max_body_bytes = 1024;
       }},
      {"upper bounds",
       [](Config& c) {
         c.max_connections = c.max_locks_per_session = c.max_waiters_per_resource = 1'000'000;
         c.max_inflight_per_session = c.max_observations_per_session = 100'000;
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

}  // namespace
}  // namespace lw::config_test
