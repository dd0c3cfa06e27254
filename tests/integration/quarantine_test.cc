// Restart quarantine against real masters: a master that started less than max_ttl ago (fresh,
// or restarted without persistence after kill -9) is seen, shown and kept out of quorum until
// max_ttl after its start; with restart_quarantine off it always counts.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "metrics_util.h"
#include "state_util.h"
#include "support/agent_process.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test {
namespace {

using nlohmann::json;

// The quarantine lasts max_ttl: long enough that everything a test checks while the masters
// are still quarantined happens well within it, however loaded the box (an ASan/TSan agent
// starting, state snapshots every 250 ms). Checks of ">= max_ttl after the start" stay exact.
constexpr int64_t kMaxTtlMs = 15'000;
// For a condition the agent reaches on its own (a health tick, a snapshot, a reconnect).
constexpr milliseconds kEventDeadline{10'000};

std::vector<std::string> QuarantineArgs(bool on) {
  return {"--restart-quarantine", on ? "true" : "false", "--max-ttl-ms",
          std::to_string(kMaxTtlMs), "--default-ttl-ms", "1000"};
}

std::string Addr(const RedisCluster& cluster, int i) {
  return "127.0.0.1:" + std::to_string(cluster.port(i));
}

double Quarantined(const AgentProcess& agent, const RedisCluster& cluster, int i) {
  return MetricNow(agent.admin_port(), "lockwarden_master_quarantined",
                   {{"master", Addr(cluster, i)}});
}

int CountNodes(const json& health, bool up, bool quarantined) {
  int n = 0;
  for (const json& node : health["nodes"]) {
    n += node["up"] == up && node["quarantined"] == quarantined;
  }
  return n;
}

// n fresh masters, an agent on them with restart quarantine on, and a client.
struct Stack {
  explicit Stack(int n)
      : cluster(n),
        agent(cluster, QuarantineArgs(true), AgentProcess::Readiness::kSocket),
        c(agent.Connect()) {}
  // True once every master is up and counts (max_ttl after it started), within 2 max_ttl.
  bool AllCount() {
    return Eventually([&] { return CountNodes(c.Health(), true, false) == cluster.size(); },
                      milliseconds(2 * kMaxTtlMs));
  }
  RedisCluster cluster;
  AgentProcess agent;
  lw::client::Client c;
};

TEST(QuarantineTest, FreshMastersCountOnlyMaxTtlAfterTheyStarted) {
  const auto before_masters = SteadyClock::now();  // every master starts after this
  Stack stack(5);
  auto& [cluster, agent, c] = stack;

  // A master is up only once its INFO answer was judged: never up and counted meanwhile.
  json health;
  ASSERT_TRUE(Eventually(
      [&] {
        health = c.Health();
        EXPECT_EQ(CountNodes(health, true, false), 0) << health.dump();
        return CountNodes(health, true, true) == 5;
      },
      kEventDeadline))
      << health.dump() << agent.Log();
  ASSERT_LT(MsSince(before_masters), kMaxTtlMs) << "too slow a start to test the quarantine";
  for (const json& node : health["nodes"]) {
    EXPECT_GT(node["quarantine_left_ms"].get<int64_t>(), 0) << node.dump();
    // Up to a second longer: Redis's uptime may be a second more than the real one.
    EXPECT_LE(node["quarantine_left_ms"].get<int64_t>(), kMaxTtlMs + 1000) << node.dump();
    EXPECT_NE(node["quarantine_reason"].get<std::string>().find("started"), std::string::npos);
  }

  const json refused = c.Acquire("fresh", 1000, 0);
  EXPECT_EQ(refused.value("error", ""), "no_quorum") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("quarantine"), std::string::npos) << refused.dump();

  const json state =
      StateWhen(agent, [](const json& s) { return s["quorum"]["up"] == 5; }, kEventDeadline);
  EXPECT_EQ(state["quorum"]["up"], 5) << state["quorum"].dump();
  EXPECT_EQ(state["quorum"]["usable"], 0);
  EXPECT_EQ(state["quorum"]["state"], "lost");
  for (const json& m : state["masters"]) {
    EXPECT_EQ(m["quarantined"], true) << m.dump();
    EXPECT_TRUE(m["quarantine_left_ms"].is_number()) << m.dump();
    EXPECT_NE(m["quarantine_reason"], "");
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Quarantined(agent, cluster, i), 1) << i;
  EXPECT_EQ(HttpGet(agent.admin_port(), "/readyz").status, 503);

  // Counted again max_ttl after they started, and not before.
  ASSERT_TRUE(stack.AllCount()) << agent.Log();
  EXPECT_GE(MsSince(before_masters), kMaxTtlMs);
  const json granted = c.Acquire("fresh", 1000, 0);
  EXPECT_TRUE(granted.value("ok", false)) << granted.dump();
  EXPECT_TRUE(Eventually([&] { return HttpGet(agent.admin_port(), "/readyz").status == 200; },
                         kEventDeadline));
  // The gauge follows within a health tick.
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(Eventually([&] { return Quarantined(agent, cluster, i) == 0; }, kEventDeadline))
        << i;
  }
  const json later = StateWhen(
      agent, [](const json& s) { return s["quorum"]["usable"] == 5; }, kEventDeadline);
  EXPECT_EQ(later["quorum"]["state"], "healthy");
  EXPECT_TRUE(HasEvent(later, "master_quarantined", "started")) << later["events"].dump();
  EXPECT_TRUE(HasEvent(later, "master_quarantine_ended", Addr(cluster, 0)));
}

TEST(QuarantineTest, RestartedMasterIsQuarantinedWhileTheOthersGrant) {
  Stack stack(5);
  auto& [cluster, agent, c] = stack;
  ASSERT_TRUE(stack.AllCount()) << agent.Log();
  constexpr int kVictim = 2;
  const std::string old_run_id = State(agent)["masters"][kVictim]["run_id"];
  ASSERT_NE(old_run_id, "");

  cluster.Kill(kVictim);
  const auto before_restart = SteadyClock::now();  // the new process starts after this
  cluster.Restart(kVictim);
  json state;
  ASSERT_TRUE(Eventually(
      [&] {
        state = State(agent);
        const json& m = state["masters"][kVictim];
        return m["up"] == true && m["run_id"] != old_run_id;
      },
      kEventDeadline))
      << state.dump() << agent.Log();
  ASSERT_LT(MsSince(before_restart), kMaxTtlMs) << "too slow a restart to test the quarantine";
  const json& m = state["masters"][kVictim];
  EXPECT_EQ(m["quarantined"], true) << m.dump();
  EXPECT_NE(m["quarantine_reason"].get<std::string>().find("restarted"), std::string::npos)
      << m.dump();
  EXPECT_EQ(state["quorum"]["up"], 5);
  EXPECT_EQ(state["quorum"]["usable"], 4);
  EXPECT_EQ(state["quorum"]["margin"], 1);
  EXPECT_EQ(state["quorum"]["state"], "at_risk");
  EXPECT_EQ(Quarantined(agent, cluster, kVictim), 1);
  EXPECT_EQ(Quarantined(agent, cluster, 0), 0);
  const json health = c.Health();
  EXPECT_EQ(health["nodes"][kVictim]["quarantined"], true) << health.dump();
  EXPECT_EQ(CountNodes(health, true, false), 4);

  // The other four still make a quorum.
  const json r = c.Acquire("after-restart", 1000, 0);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_TRUE(c.Release("after-restart", r["token"]).value("ok", false));

  ASSERT_TRUE(stack.AllCount()) << agent.Log();
  EXPECT_GE(MsSince(before_restart), kMaxTtlMs);
  EXPECT_TRUE(
      Eventually([&] { return Quarantined(agent, cluster, kVictim) == 0; }, kEventDeadline));
  const json later = StateWhen(
      agent, [](const json& s) { return s["quorum"]["usable"] == 5; }, kEventDeadline);
  EXPECT_EQ(later["quorum"]["usable"], 5);
  EXPECT_TRUE(HasEvent(later, "master_quarantined", "restarted")) << later["events"].dump();
  EXPECT_TRUE(HasEvent(later, "master_quarantine_ended", Addr(cluster, kVictim)));
}

// Runs one command on master i; true when it was answered without an error.
bool Command(const RedisCluster& cluster, int i, const std::vector<std::string>& words) {
  redisContext* ctx = redisConnect("127.0.0.1", cluster.port(i));
  if (ctx == nullptr || ctx->err) {
    if (ctx) redisFree(ctx);
    return false;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& w : words) {
    argv.push_back(w.c_str());
    lens.push_back(w.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
  const bool ok = reply != nullptr && reply->type != REDIS_REPLY_ERROR;
  if (reply) freeReplyObject(reply);
  redisFree(ctx);
  return ok;
}

TEST(QuarantineTest, AMasterThatRefusesInfoIsUsedButQuarantinedForMaxTtl) {
  Stack stack(3);
  auto& [cluster, agent, c] = stack;
  ASSERT_TRUE(stack.AllCount()) << agent.Log();
  // INFO now answers NOPERM; dropping the agent's connections makes it handshake again.
  ASSERT_TRUE(Command(cluster, 0, {"ACL", "SETUSER", "default", "-info"}));
  const auto before_drop = SteadyClock::now();
  ASSERT_TRUE(Command(cluster, 0, {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}));
  json health;
  ASSERT_TRUE(Eventually(
      [&] {
        health = c.Health();
        return health["nodes"][0]["up"] == true && health["nodes"][0]["quarantined"] == true;
      },
      kEventDeadline))
      << health.dump() << agent.Log();
  EXPECT_NE(
      health["nodes"][0]["quarantine_reason"].get<std::string>().find("INFO server failed (NOPERM"),
      std::string::npos)
      << health.dump();
  EXPECT_NE(agent.Log().find("is quarantined for"), std::string::npos);
  EXPECT_TRUE(c.Acquire("no-info", 1000, 0).value("ok", false));  // 2 of 3 still count
  ASSERT_TRUE(Eventually([&] { return c.Health()["nodes"][0]["quarantined"] == false; },
                         milliseconds(2 * kMaxTtlMs)))
      << agent.Log();
  EXPECT_GE(MsSince(before_drop), kMaxTtlMs);
}

TEST(QuarantineTest, OffMeansARestartedMasterAlwaysCounts) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster, QuarantineArgs(false));
  auto c = agent.Connect();
  EXPECT_EQ(CountNodes(c.Health(), true, false), 5);
  EXPECT_TRUE(c.Acquire("off", 1000, 0).value("ok", false));

  const std::string old_run_id = State(agent)["masters"][1]["run_id"];
  cluster.Kill(1);
  cluster.Restart(1);
  bool ever_quarantined = false;
  ASSERT_TRUE(Eventually(
      [&] {
        const json state = State(agent);
        for (const json& m : state["masters"]) ever_quarantined |= m["quarantined"] == true;
        const json& m = state["masters"][1];
        return m["up"] == true && m["run_id"] != old_run_id;
      },
      kEventDeadline))
      << agent.Log();
  EXPECT_FALSE(ever_quarantined);
  EXPECT_EQ(CountNodes(c.Health(), true, false), 5);
  EXPECT_EQ(Quarantined(agent, cluster, 1), 0);
  EXPECT_NE(agent.Log().find("restarted: run_id " + old_run_id), std::string::npos);
}

}  // namespace
}  // namespace lw::test
