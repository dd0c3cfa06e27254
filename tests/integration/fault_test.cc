// Master failures: kill -9, SIGSTOP, and a quorum lost while a renewed lock is held.

#include <gtest/gtest.h>

#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test {
namespace {

using nlohmann::json;

constexpr int kNodeTimeoutMs = 50;  // the agent's default

// True once the agent reports `up` masters up.
bool AgentSeesUp(lw::client::Client& c, int up) {
  int n = 0;
  const json health = c.Health();  // named: a range-for over a temporary's member dangles
  for (const auto& node : health["nodes"]) n += node["up"].get<bool>();
  return n == up;
}

TEST(FaultTest, TwoOfFiveMastersKilledStillGrants) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  cluster.Kill(0);
  cluster.Kill(3);
  const auto t0 = SteadyClock::now();
  const json r = c.Acquire("k2", 10'000, 0);
  const double took = MsSince(t0);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_LT(took, kNodeTimeoutMs + 30);
  EXPECT_EQ(cluster.CountHolding(KeyOf("k2"), r["token"]), 3);
  EXPECT_TRUE(c.Release("k2", r["token"]).value("ok", false));
  EXPECT_EQ(cluster.CountWithKey(KeyOf("k2")), 0);
}

TEST(FaultTest, ThreeOfFiveKilledIsNoQuorumInTimeAndLeavesNoKey) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  for (int i : {0, 1, 2}) cluster.Kill(i);
  constexpr int kWaitMs = 300;
  const auto t0 = SteadyClock::now();
  const json r = c.Acquire("k3", 10'000, kWaitMs);
  const double took = MsSince(t0);
  EXPECT_EQ(r["error"], "no_quorum") << r.dump();
  EXPECT_LE(took, kWaitMs + kNodeTimeoutMs + 20) << "no_quorum took " << took << " ms";
  // Survivors that voted yes had the key deleted again.
  EXPECT_TRUE(Eventually([&] { return cluster.CountWithKey(KeyOf("k3")) == 0; },
                         milliseconds(100)));
  // Masters come back: the agent reconnects and grants again.
  for (int i : {0, 1, 2}) cluster.Restart(i);
  ASSERT_TRUE(Eventually([&] { return AgentSeesUp(c, 5); }, milliseconds(5'000))) << agent.Log();
  EXPECT_TRUE(c.Acquire("k3", 10'000, 0).value("ok", false));
}

TEST(FaultTest, OneStoppedMasterDoesNotSlowTheGrant) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  cluster.Stop(2);  // the agent still believes it is up: its commands just never answer
  const auto t0 = SteadyClock::now();
  const json r = c.Acquire("stopped", 10'000, 0);
  const double took = MsSince(t0);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_LT(took, kNodeTimeoutMs + 10) << "grant took " << took << " ms";
  EXPECT_EQ(cluster.CountHolding(KeyOf("stopped"), r["token"]), 4);
  // Release is answered within the node timeout even though one master never answers.
  const auto t1 = SteadyClock::now();
  EXPECT_TRUE(c.Release("stopped", r["token"]).value("ok", false));
  EXPECT_LT(MsSince(t1), kNodeTimeoutMs + 30);
  cluster.Cont(2);
  // The SET queued on the stopped master ran late, then our DEL behind it: nothing is left.
  EXPECT_TRUE(Eventually([&] { return cluster.CountWithKey(KeyOf("stopped")) == 0; },
                         milliseconds(1'000)));
}

TEST(FaultTest, QuorumStoppedPastTheTtlLosesTheRenewedLock) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  const json r = c.Acquire("lose-me", 1'000, 0, /*renew=*/true);
  ASSERT_TRUE(r.value("ok", false));
  const auto t0 = SteadyClock::now();
  for (int i : {0, 1, 2}) cluster.Stop(i);
  const auto ev = c.NextEvent(milliseconds(3'000));
  ASSERT_TRUE(ev.has_value()) << "no lost event";
  EXPECT_EQ((*ev)["event"], "lost");
  EXPECT_EQ((*ev)["resource"], "lose-me");
  EXPECT_EQ((*ev)["token"], r["token"]);
  EXPECT_EQ((*ev)["reason"], "renew_failed");
  // Lost no later than the validity it was granted with (plus one node timeout).
  EXPECT_LE(MsSince(t0), r["validity_ms"].get<double>() + kNodeTimeoutMs + 50);
  EXPECT_EQ(c.Held()["locks"].size(), 0u);
  for (int i : {0, 1, 2}) cluster.Cont(i);
}

TEST(FaultTest, KilledMasterRestartedIsReconnected) {
  RedisCluster cluster(3);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  cluster.Kill(1);
  ASSERT_TRUE(Eventually([&] { return AgentSeesUp(c, 2); }, milliseconds(2'000))) << agent.Log();
  cluster.Restart(1);
  ASSERT_TRUE(Eventually([&] { return AgentSeesUp(c, 3); }, milliseconds(5'000))) << agent.Log();
  const json r = c.Acquire("back", 10'000, 0);
  ASSERT_TRUE(r.value("ok", false));
  EXPECT_EQ(cluster.CountHolding(KeyOf("back"), r["token"]), 3);
}

TEST(FaultTest, ScriptCacheFlushedFallsBackToEval) {
  RedisCluster cluster(3);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  const json r = c.Acquire("flush", 10'000, 0);
  ASSERT_TRUE(r.value("ok", false));
  cluster.ScriptFlush();
  const json e = c.Extend("flush", r["token"], 20'000);
  EXPECT_TRUE(e.value("ok", false)) << e.dump();
  EXPECT_TRUE(c.Release("flush", r["token"]).value("ok", false));
  EXPECT_EQ(cluster.CountWithKey(KeyOf("flush")), 0);
}

}  // namespace
}  // namespace lw::test
