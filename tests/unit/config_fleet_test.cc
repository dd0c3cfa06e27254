// Validation of the fleet settings (agent_name, heartbeat_ttl_ms, fleet_refresh_ms, admin_url)
// and the rule that keeps lock and fence keys out of the fleet's namespace.

#include <gtest/gtest.h>

#include "config/config.h"
#include "unit/config_fixture.h"

namespace lw::config_test {
namespace {

TEST(ConfigFleet, EachRuleRefusesAndNamesTheField) {
  const std::vector<RuleCase> cases = {
      {"key prefix in the fleet namespace", [](Config& c) { c.key_prefix = "lockwarden:locks:"; },
       "key_prefix", "\"lockwarden:\""},
      {"key prefix a prefix of the namespace", [](Config& c) { c.key_prefix = "lock"; },
       "key_prefix", "fleet keys would be taken for locks"},
      {"fence prefix in the fleet namespace",
       [](Config& c) { c.fence_prefix = "lockwarden:fence:"; }, "fence_prefix", "lockwarden:"},
      {"heartbeat too short", [](Config& c) { c.heartbeat_ttl_ms = 2'999; }, "heartbeat_ttl_ms",
       "or 0: no fleet presence"},
      {"heartbeat too long", [](Config& c) { c.heartbeat_ttl_ms = 300'001; }, "heartbeat_ttl_ms",
       "(5 min)"},
      {"unmarked readers without fleet presence",
       [](Config& c) {
         c.mark_readers = false;
         c.heartbeat_ttl_ms = 0;
       },
       "mark_readers", "needs fleet presence"},
      {"refresh too often", [](Config& c) { c.fleet_refresh_ms = 999; }, "fleet_refresh_ms",
       "between 1000 ms"},
      {"name with a line break", [](Config& c) { c.agent_name = "web\n1"; }, "agent_name",
       "control characters"},
      {"name too long", [](Config& c) { c.agent_name = std::string(129, 'n'); }, "agent_name",
       "at most 128"},
      {"admin url not http", [](Config& c) { c.admin_url = "ftp://host:9477"; }, "admin_url",
       "not an http:// or https:// URL"},
  };
  ExpectEachRefused(cases);
}

TEST(ConfigFleet, DefaultsAndBoundariesAreAccepted) {
  const Config defaults;
  EXPECT_EQ(defaults.agent_name, "") << "empty: the host name";
  EXPECT_EQ(defaults.heartbeat_ttl_ms, 10'000);
  EXPECT_TRUE(defaults.share_cmdline);
  EXPECT_EQ(defaults.fleet_refresh_ms, 5'000);
  EXPECT_EQ(defaults.admin_url, "");
  const std::vector<std::pair<std::string, std::function<void(Config&)>>> cases = {
      {"no fleet presence", [](Config& c) { c.heartbeat_ttl_ms = 0; }},
      {"unmarked readers with fleet presence", [](Config& c) { c.mark_readers = false; }},
      {"heartbeat bounds", [](Config& c) { c.heartbeat_ttl_ms = 3'000; }},
      {"heartbeat upper bound", [](Config& c) { c.heartbeat_ttl_ms = 300'000; }},
      {"refresh lower bound", [](Config& c) { c.fleet_refresh_ms = 1'000; }},
      {"a readable name", [](Config& c) { c.agent_name = "web-1 (eu)"; }},
      {"an https url", [](Config& c) { c.admin_url = "https://lw.example:443/"; }},
      {"a prefix beside the namespace", [](Config& c) { c.key_prefix = "lockwarden-locks:"; }},
  };
  for (const auto& [name, mutate] : cases) {
    Config config = ValidConfig();
    mutate(config);
    EXPECT_EQ(ValidateConfig(config), std::nullopt) << name;
  }
}

}  // namespace
}  // namespace lw::config_test
