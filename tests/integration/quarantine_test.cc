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

namespace lw::test::quarantine {
namespace {

using nlohmann::json;

// The quarantine lasts max_ttl: long enough that what a test observes while the masters are
// still quarantined normally happens well within it. A test observes first and judges after:
// an attempt whose observations took longer than max_ttl (a loaded box) proves nothing and is
// run again from scratch (UntilConclusive). Checks of ">= max_ttl after the start" stay exact.
constexpr int64_t kMaxTtlMs = 8'000;
constexpr int kAttempts = 3;
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
  UntilConclusive(kAttempts, [] {
    const auto before_masters = SteadyClock::now();  // every master starts after this
    Stack stack(5);
    auto& [cluster, agent, c] = stack;

    // A master is up only once its INFO answer was judged: never up and counted meanwhile.
    json health;
    const bool all_up = Eventually(
        [&] {
          health = c.Health();
          EXPECT_EQ(CountNodes(health, true, false), 0) << health.dump();
          return CountNodes(health, true, true) == 5;
        },
        kEventDeadline);
    if (!all_up) {
      ADD_FAILURE() << health.dump() << agent.Log();
      return true;
    }
    // What the agent says while every master is quarantined.
    const json refused = c.Acquire("fresh", 1000, 0);
    const json state =
        StateWhen(agent, [](const json& s) { return s["quorum"]["up"] == 5; }, kEventDeadline);
    std::vector<double> gauges;
    for (int i = 0; i < 5; ++i) gauges.push_back(Quarantined(agent, cluster, i));
    const int readyz = HttpGet(agent.admin_port(), "/readyz").status;
    if (MsSince(before_masters) >= kMaxTtlMs) return false;  // the quarantine may have ended

    for (const json& node : health["nodes"]) {
      EXPECT_GT(node["quarantine_left_ms"].get<int64_t>(), 0) << node.dump();
      // Up to a second longer: Redis's uptime may be a second more than the real one.
      EXPECT_LE(node["quarantine_left_ms"].get<int64_t>(), kMaxTtlMs + 1000) << node.dump();
      EXPECT_NE(node["quarantine_reason"].get<std::string>().find("started"), std::string::npos);
    }
    EXPECT_EQ(refused.value("error", ""), "no_quorum") << refused.dump();
    EXPECT_NE(refused.value("message", "").find("quarantine"), std::string::npos)
        << refused.dump();
    EXPECT_EQ(state["quorum"]["up"], 5) << state["quorum"].dump();
    EXPECT_EQ(state["quorum"]["usable"], 0);
    EXPECT_EQ(state["quorum"]["state"], "lost");
    for (const json& m : state["masters"]) {
      EXPECT_EQ(m["quarantined"], true) << m.dump();
      EXPECT_TRUE(m["quarantine_left_ms"].is_number()) << m.dump();
      EXPECT_NE(m["quarantine_reason"], "");
    }
    for (int i = 0; i < 5; ++i) EXPECT_EQ(gauges[i], 1) << i;
    EXPECT_EQ(readyz, 503);

    // Counted again max_ttl after they started, and not before.
    EXPECT_TRUE(stack.AllCount()) << agent.Log();
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
    return true;
  });
}

TEST(QuarantineTest, RestartedMasterIsQuarantinedWhileTheOthersGrant) {
  Stack stack(5);
  auto& [cluster, agent, c] = stack;
  ASSERT_TRUE(stack.AllCount()) << agent.Log();
  constexpr int kVictim = 2;
  UntilConclusive(kAttempts, [&] {
    const std::string old_run_id = State(agent)["masters"][kVictim]["run_id"];
    EXPECT_NE(old_run_id, "");
    cluster.Kill(kVictim);
    const auto before_restart = SteadyClock::now();  // the new process starts after this
    cluster.Restart(kVictim);
    json state;
    const bool back = Eventually(
        [&] {
          state = State(agent);
          const json& m = state["masters"][kVictim];
          return m["up"] == true && m["run_id"] != old_run_id;
        },
        kEventDeadline);
    if (!back) {
      ADD_FAILURE() << state.dump() << agent.Log();
      return true;
    }
    // What the agent says while the restarted master is quarantined.
    const std::vector<double> gauges = {Quarantined(agent, cluster, kVictim),
                                        Quarantined(agent, cluster, 0)};
    const json health = c.Health();
    const json r = c.Acquire("after-restart", 1000, 0);  // the other four still make a quorum
    const bool released = r.value("ok", false) &&
                          c.Release("after-restart", r["token"]).value("ok", false);
    if (MsSince(before_restart) >= kMaxTtlMs) {
      EXPECT_TRUE(stack.AllCount()) << agent.Log();  // the next attempt starts from all counted
      return false;
    }

    const json& m = state["masters"][kVictim];
    EXPECT_EQ(m["quarantined"], true) << m.dump();
    EXPECT_NE(m["quarantine_reason"].get<std::string>().find("restarted"), std::string::npos)
        << m.dump();
    EXPECT_EQ(state["quorum"]["up"], 5);
    EXPECT_EQ(state["quorum"]["usable"], 4);
    EXPECT_EQ(state["quorum"]["margin"], 1);
    EXPECT_EQ(state["quorum"]["state"], "at_risk");
    EXPECT_EQ(gauges[0], 1);
    EXPECT_EQ(gauges[1], 0);
    EXPECT_EQ(health["nodes"][kVictim]["quarantined"], true) << health.dump();
    EXPECT_EQ(CountNodes(health, true, false), 4);
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    EXPECT_TRUE(released);

    EXPECT_TRUE(stack.AllCount()) << agent.Log();
    EXPECT_GE(MsSince(before_restart), kMaxTtlMs);
    EXPECT_TRUE(
        Eventually([&] { return Quarantined(agent, cluster, kVictim) == 0; }, kEventDeadline));
    const json later = StateWhen(
        agent, [](const json& s) { return s["quorum"]["usable"] == 5; }, kEventDeadline);
    EXPECT_EQ(later["quorum"]["usable"], 5);
    EXPECT_TRUE(HasEvent(later, "master_quarantined", "restarted")) << later["events"].dump();
    EXPECT_TRUE(HasEvent(later, "master_quarantine_ended", Addr(cluster, kVictim)));
    return true;
  });
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
  UntilConclusive(kAttempts, [] {
    Stack stack(3);
    auto& [cluster, agent, c] = stack;
    if (!stack.AllCount()) {
      ADD_FAILURE() << agent.Log();
      return true;
    }
    // INFO now answers NOPERM; dropping the agent's connections makes it handshake again.
    EXPECT_TRUE(Command(cluster, 0, {"ACL", "SETUSER", "default", "-info"}));
    const auto before_drop = SteadyClock::now();
    EXPECT_TRUE(Command(cluster, 0, {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}));
    json health;
    const bool quarantined = Eventually(
        [&] {
          health = c.Health();
          return health["nodes"][0]["up"] == true && health["nodes"][0]["quarantined"] == true;
        },
        kEventDeadline);
    const bool granted = c.Acquire("no-info", 1000, 0).value("ok", false);  // 2 of 3 count
    if (MsSince(before_drop) >= kMaxTtlMs) return false;  // the quarantine may have ended

    EXPECT_TRUE(quarantined) << health.dump() << agent.Log();
    EXPECT_NE(health["nodes"][0]["quarantine_reason"].get<std::string>().find(
                  "INFO server failed (NOPERM"),
              std::string::npos)
        << health.dump();
    EXPECT_NE(agent.Log().find("is quarantined for"), std::string::npos);
    EXPECT_TRUE(granted);
    EXPECT_TRUE(Eventually([&] { return c.Health()["nodes"][0]["quarantined"] == false; },
                           milliseconds(2 * kMaxTtlMs)))
        << agent.Log();
    EXPECT_GE(MsSince(before_drop), kMaxTtlMs);
    return true;
  });
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
}  // namespace lw::test::quarantine
