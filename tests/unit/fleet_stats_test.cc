// Fleet totals on a registry of their own, exported by /metrics only while this agent is the
// reporter (Metrics::AddConditional).

#include "fleet/fleet_stats.h"

#include <gtest/gtest.h>

#include <atomic>

#include "observe/metrics.h"

namespace lw::fleet {
namespace {

TEST(FleetStats, TotalsAreExportedOnlyWhileTheAgentIsTheReporter) {
  Metrics metrics({"10.0.0.1:6379"}, {"0.1.0", "abc"});
  FleetStats stats(metrics.registry());
  std::atomic<bool> reporter{false};
  metrics.AddConditional(stats.totals_registry, [&] { return reporter.load(); });
  stats.totals.locks.Set(3);
  stats.own.heartbeats.Inc();

  std::string text = metrics.Serialize();
  EXPECT_EQ(text.find("lockwarden_fleet_locks "), std::string::npos) << text;
  EXPECT_NE(text.find("lockwarden_fleet_heartbeats_total 1"), std::string::npos);
  reporter = true;
  text = metrics.Serialize();
  EXPECT_NE(text.find("lockwarden_fleet_locks 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lockwarden_locks_held"), std::string::npos);
  reporter = false;
  EXPECT_EQ(metrics.Serialize().find("lockwarden_fleet_locks "), std::string::npos);
}

}  // namespace
}  // namespace lw::fleet
