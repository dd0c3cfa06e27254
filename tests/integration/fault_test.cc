// Master failures: kill -9, SIGSTOP, and a quorum lost while a renewed lock is held.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::fault {
namespace {

using nlohmann::json;

// Where a test checks that the agent did NOT wait for a master that is dead or stopped, the
// agent gets a 10 s node timeout (the most it allows; the shortest ttl must then be twice
// that), and the operation must end well before that timer could have fired: what decides is
// then whether it waited, not how fast the box is.
constexpr int kLongNodeTimeoutMs = 10'000;
const std::vector<std::string> kLongNodeTimeout = {
    "--node-timeout-ms", std::to_string(kLongNodeTimeoutMs), "--min-ttl-ms",
    std::to_string(2 * kLongNodeTimeoutMs), "--max-ttl-ms", "60000", "--default-ttl-ms", "30000"};
constexpr int64_t kTtlMs = 30'000;  // within the limits above

// True once the agent reports `up` masters up.
bool AgentSeesUp(lw::client::Client& c, int up) {
  int n = 0;
  const json health = c.Health();  // named: a range-for over a temporary's member dangles
  for (const auto& node : health["nodes"]) n += node["up"].get<bool>();
  return n == up;
}

TEST(FaultTest, TwoOfFiveMastersKilledStillGrants) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster, kLongNodeTimeout);
  auto c = agent.Connect();
  cluster.Kill(0);
  cluster.Kill(3);
  const auto t0 = SteadyClock::now();
  const json r = c.Acquire("k2", kTtlMs, 0);
  const double took = MsSince(t0);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_LT(took, kLongNodeTimeoutMs / 2) << "the grant waited for the dead masters";
  EXPECT_EQ(cluster.AwaitHoldingGrant(KeyOf("k2"), r["token"], 3), 3);
  EXPECT_TRUE(c.Release("k2", r["token"]).value("ok", false));
  EXPECT_EQ(cluster.CountWithKey(KeyOf("k2")), 0);
}

TEST(FaultTest, ThreeOfFiveKilledIsNoQuorumInTimeAndLeavesNoKey) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster, kLongNodeTimeout);
  auto c = agent.Connect();
  for (int i : {0, 1, 2}) cluster.Kill(i);
  constexpr int kWaitMs = 300;
  const auto t0 = SteadyClock::now();
  const json r = c.Acquire("k3", kTtlMs, kWaitMs);
  const double took = MsSince(t0);
  EXPECT_EQ(r["error"], "no_quorum") << r.dump();
  // It tried until wait_ms ran out, and no longer: dead masters answer at once (their
  // connection is gone), so no attempt waited for the node timeout.
  EXPECT_GE(took, kWaitMs - 1) << "gave up before wait_ms";
  EXPECT_LT(took, kLongNodeTimeoutMs / 2) << "no_quorum took " << took << " ms";
  // Survivors that voted yes had the key deleted again.
  EXPECT_TRUE(Eventually([&] { return cluster.CountWithKey(KeyOf("k3")) == 0; },
                         milliseconds(10'000)));
  // Masters come back: the agent reconnects and grants again.
  for (int i : {0, 1, 2}) cluster.Restart(i);
  ASSERT_TRUE(Eventually([&] { return AgentSeesUp(c, 5); }, milliseconds(15'000))) << agent.Log();
  EXPECT_TRUE(c.Acquire("k3", kTtlMs, 0).value("ok", false));
}

TEST(FaultTest, OneStoppedMasterDoesNotSlowTheGrant) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster, kLongNodeTimeout);
  auto c = agent.Connect();
  cluster.Stop(2);  // the agent still believes it is up: its commands just never answer
  const auto t0 = SteadyClock::now();
  const json r = c.Acquire("stopped", kTtlMs, 0);
  const double took = MsSince(t0);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_LT(took, kLongNodeTimeoutMs / 2) << "the grant waited for the stopped master";
  EXPECT_EQ(cluster.AwaitHoldingGrant(KeyOf("stopped"), r["token"], 4), 4);
  // A release waits for every master, but for one that never answers only until it is
  // counted out (its connection dropped as stalled, or the node timeout): it is answered.
  const auto t1 = SteadyClock::now();
  EXPECT_TRUE(c.Release("stopped", r["token"]).value("ok", false));
  EXPECT_LT(MsSince(t1), kLongNodeTimeoutMs * 3 / 2) << "waited past the node timeout";
  cluster.Cont(2);
  // The SET queued on the stopped master ran late, then our DEL behind it: nothing is left.
  EXPECT_TRUE(Eventually([&] { return cluster.CountWithKey(KeyOf("stopped")) == 0; },
                         milliseconds(10'000)));
}

TEST(FaultTest, QuorumStoppedPastTheTtlLosesTheRenewedLock) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  // Renewed every ttl/3 (2 s): the masters are normally stopped long before the first
  // renewal, and the lock is lost when the validity it was granted with runs out.
  constexpr int64_t kRenewedTtlMs = 6'000;
  const auto asked = SteadyClock::now();
  const json r = c.Acquire("lose-me", kRenewedTtlMs, 0, /*renew=*/true);
  ASSERT_TRUE(r.value("ok", false));
  const double validity = r["validity_ms"].get<double>();
  for (int i : {0, 1, 2}) cluster.Stop(i);
  const auto stopped = SteadyClock::now();  // no renewal can win a quorum after this
  const auto ev = c.NextEvent(milliseconds(30'000));
  const auto lost_at = SteadyClock::now();
  const double lost_after = std::chrono::duration<double, std::milli>(lost_at - asked).count();
  ASSERT_TRUE(ev.has_value()) << "no lost event";
  EXPECT_EQ((*ev)["event"], "lost");
  EXPECT_EQ((*ev)["resource"], "lose-me");
  EXPECT_EQ((*ev)["token"], r["token"]);
  EXPECT_EQ((*ev)["reason"], "renew_failed");
  // Lost once the validity ran out, and by then: not at a later renewal attempt (every 2 s)
  // or one ttl later. The validity counts from the grant (after `asked`), or, had a renewal won
  // before the masters were stopped (a very slow box), from that renewal (before `stopped`).
  const double renewed =
      MetricNow(agent.admin_port(), "lockwarden_renewals_total", {{"outcome", "extended"}});
  EXPECT_GE(lost_after, validity) << "lost while still valid";
  if (renewed == 0) {
    EXPECT_LT(lost_after, validity + kRenewedTtlMs / 3) << "reported long after the validity";
  } else {
    const double lost_after_stop =
        std::chrono::duration<double, std::milli>(lost_at - stopped).count();
    EXPECT_LT(lost_after_stop, kRenewedTtlMs + kRenewedTtlMs / 3)
        << "reported long after the last renewal's validity";
  }
  EXPECT_EQ(c.Held()["locks"].size(), 0u);
  for (int i : {0, 1, 2}) cluster.Cont(i);
}

TEST(FaultTest, KilledMasterRestartedIsReconnected) {
  RedisCluster cluster(3);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  cluster.Kill(1);
  ASSERT_TRUE(Eventually([&] { return AgentSeesUp(c, 2); }, milliseconds(15'000))) << agent.Log();
  cluster.Restart(1);
  ASSERT_TRUE(Eventually([&] { return AgentSeesUp(c, 3); }, milliseconds(15'000))) << agent.Log();
  const json r = c.Acquire("back", 10'000, 0);
  ASSERT_TRUE(r.value("ok", false));
  EXPECT_EQ(cluster.AwaitHoldingGrant(KeyOf("back"), r["token"], 3), 3);
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
}  // namespace lw::test::fault
