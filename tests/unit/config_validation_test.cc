// Validation rules of ValidateConfig: one failing case (at least) per rule, each naming its field,
// and the boundaries that are accepted.

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

TEST(ConfigValidation, EachRuleRefusesAndNamesTheField) {
  const std::vector<RuleCase> cases = {
      {"no masters", [](Config& c) { c.masters.clear(); }, "masters", "at least one"},
      {"duplicate", [](Config& c) { c.masters.push_back(c.masters[0]); }, "masters",
       "listed twice"},
      {"empty host", [](Config& c) { c.masters[0].host = ""; }, "masters", "empty host"},
      {"port 0", [](Config& c) { c.masters[0].port = 0; }, "masters", "port 0"},
      {"256 masters",
       [](Config& c) {
         for (int p = 1; p <= 255; ++p) {
           c.masters.push_back(MustParseUrl("redis://127.0.0.2:" + std::to_string(p)));
         }
       },
       "masters", "at most 255"},
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
      {"election poll low", [](Config& c) { c.election_poll_ms = 9; }, "election_poll_ms",
       "between 10 ms"},
      {"election poll high", [](Config& c) { c.election_poll_ms = 60'001; }, "election_poll_ms",
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
         c.connect_timeout_ms = c.health_interval_ms = c.election_poll_ms = 60'000;
         c.reconnect_max_backoff_ms = 600'000;
         c.max_line_bytes = 16LL * 1024 * 1024;
         c.drift_factor = 0.499;
       }},
      {"lower bounds",
       [](Config& c) {
         c.reconnect_max_backoff_ms = c.health_interval_ms = c.election_poll_ms = 10;
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

}  // namespace
}  // namespace lw::config_test
