// Lock operations against 5 real redis-server masters and a real agent process.

#include <gtest/gtest.h>

#include <thread>

#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test {
namespace {

using nlohmann::json;

class LockOpsTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{5};
  AgentProcess agent_{cluster_};
};

TEST_F(LockOpsTest, GrantWritesTheTokenOnEveryMasterAndReleaseRemovesIt) {
  auto c = agent_.Connect();
  const json r = c.Acquire("orders:1001", 30'000, 0);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  const std::string token = r["token"];
  EXPECT_EQ(token.size(), 40u);
  EXPECT_EQ(r["resource"], "orders:1001");
  EXPECT_GT(r["validity_ms"].get<int64_t>(), 29'000);
  EXPECT_LE(r["validity_ms"].get<int64_t>(), 30'000 - 302);  // ttl - drift (300 + 2 ms)
  EXPECT_EQ(cluster_.CountHolding(KeyOf("orders:1001"), token), 5);
  for (int i = 0; i < 5; ++i) {
    const int64_t pttl = cluster_.Pttl(i, KeyOf("orders:1001"));
    EXPECT_GT(pttl, 29'000);
    EXPECT_LE(pttl, 30'000);
  }

  const json rel = c.Release("orders:1001", token);
  EXPECT_TRUE(rel.value("ok", false)) << rel.dump();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("orders:1001")), 0);
}

TEST_F(LockOpsTest, ContenderTimesOutWhileHeldThenGetsItAfterRelease) {
  auto a = agent_.Connect();
  auto b = agent_.Connect();
  const json ra = a.Acquire("res", 10'000, 0);
  ASSERT_TRUE(ra.value("ok", false));

  const auto t0 = SteadyClock::now();
  const json rb = b.Acquire("res", 10'000, 200);
  const double waited = MsSince(t0);
  EXPECT_FALSE(rb.value("ok", true));
  EXPECT_EQ(rb["error"], "timeout") << rb.dump();
  EXPECT_GE(waited, 195);
  EXPECT_LT(waited, 200 + 150);
  EXPECT_EQ(cluster_.CountHolding(KeyOf("res"), ra["token"]), 5);

  ASSERT_TRUE(a.Release("res", ra["token"]).value("ok", false));
  const json rb2 = b.Acquire("res", 10'000, 0);
  ASSERT_TRUE(rb2.value("ok", false)) << rb2.dump();
  EXPECT_NE(rb2["token"], ra["token"]);
}

TEST_F(LockOpsTest, KeyHeldOutsideThisAgentIsRespectedAndTimesOut) {
  // Another agent (simulated by writing the keys directly) holds the lock on 3 of 5.
  for (int i = 0; i < 3; ++i) cluster_.Set(i, KeyOf("foreign"), "someone-else", 10'000);
  auto c = agent_.Connect();
  const json r = c.Acquire("foreign", 5'000, 300);
  EXPECT_EQ(r["error"], "timeout") << r.dump();
  // Our failed attempts were undone on the masters that had said yes.
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("foreign")) == 3; },
                         milliseconds(200)));
  EXPECT_EQ(cluster_.CountHolding(KeyOf("foreign"), "someone-else"), 3);
}

TEST_F(LockOpsTest, ReleaseOrExtendWithAWrongTokenIsNotHeld) {
  auto c = agent_.Connect();
  const json r = c.Acquire("x", 10'000, 0);
  ASSERT_TRUE(r.value("ok", false));
  const std::string other(40, 'a');
  EXPECT_EQ(c.Release("x", other)["error"], "not_held");
  EXPECT_EQ(c.Extend("x", other, 10'000)["error"], "not_held");
  EXPECT_EQ(c.Release("never-taken", other)["error"], "not_held");
  // Another connection cannot release it even with the right token: locks belong to sessions.
  auto d = agent_.Connect();
  EXPECT_EQ(d.Release("x", r["token"])["error"], "not_held");
  EXPECT_EQ(cluster_.CountHolding(KeyOf("x"), r["token"]), 5);
  // Released once: a second release is not_held.
  EXPECT_TRUE(c.Release("x", r["token"]).value("ok", false));
  EXPECT_EQ(c.Release("x", r["token"])["error"], "not_held");
}

TEST_F(LockOpsTest, ExtendPushesTheExpiryOnEveryMaster) {
  auto c = agent_.Connect();
  const json r = c.Acquire("ext", 2'000, 0);
  ASSERT_TRUE(r.value("ok", false));
  const json e = c.Extend("ext", r["token"], 20'000);
  ASSERT_TRUE(e.value("ok", false)) << e.dump();
  EXPECT_GT(e["validity_ms"].get<int64_t>(), 19'000);
  for (int i = 0; i < 5; ++i) EXPECT_GT(cluster_.Pttl(i, KeyOf("ext")), 19'000);
  const json held = c.Held();
  ASSERT_EQ(held["locks"].size(), 1u);
  EXPECT_EQ(held["locks"][0]["resource"], "ext");
  EXPECT_GT(held["locks"][0]["validity_ms"].get<int64_t>(), 19'000);
}

TEST_F(LockOpsTest, DisconnectReleasesKeysOnEveryMasterWithin100ms) {
  std::string token;
  {
    auto c = agent_.Connect();
    const json r = c.Acquire("crash", 60'000, 0);
    ASSERT_TRUE(r.value("ok", false));
    token = r["token"];
    ASSERT_EQ(cluster_.CountHolding(KeyOf("crash"), token), 5);
  }  // connection closed, as when the app crashes
  const auto closed = SteadyClock::now();
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("crash")) == 0; },
                         milliseconds(100)))
      << "keys still present " << MsSince(closed) << " ms after disconnect";
}

TEST_F(LockOpsTest, LocalWaitersAreServedInFifoOrder) {
  auto holder = agent_.Connect();
  const json h = holder.Acquire("fifo", 10'000, 0);
  ASSERT_TRUE(h.value("ok", false));
  std::vector<lw::client::Client> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(agent_.Connect());
    waiters.back().SendRaw(
        json{{"id", "acq"}, {"op", "acquire"}, {"resource", "fifo"}, {"wait_ms", 10'000}}
            .dump() + "\n");
    // A reply to a later request on the same connection proves the acquire was queued.
    ASSERT_TRUE(waiters.back().Ping().value("ok", false));
  }
  ASSERT_TRUE(holder.Release("fifo", h["token"]).value("ok", false));
  for (int i = 0; i < 3; ++i) {
    const json g = waiters[i].Call({{"id", "acq"}}, milliseconds(5'000));
    ASSERT_TRUE(g.value("ok", false)) << "waiter " << i << ": " << g.dump();
    for (int j = i + 1; j < 3; ++j) {
      EXPECT_FALSE(waiters[j].ReadLine(milliseconds(30)).has_value())
          << "waiter " << j << " was answered before waiter " << i << " released";
    }
    ASSERT_TRUE(waiters[i].Release("fifo", g["token"]).value("ok", false));
  }
}

TEST_F(LockOpsTest, RenewKeepsAOneSecondLockAliveForFiveSeconds) {
  auto c = agent_.Connect();
  const json r = c.Acquire("renewed", 1'000, 0, /*renew=*/true);
  ASSERT_TRUE(r.value("ok", false));
  // No lost event may arrive during 5 s (5 ttls); waiting out the time is the test.
  const auto ev = c.NextEvent(milliseconds(5'000));
  EXPECT_FALSE(ev.has_value()) << ev->dump();
  EXPECT_EQ(cluster_.CountHolding(KeyOf("renewed"), r["token"]), 5);
  EXPECT_GT(cluster_.Pttl(0, KeyOf("renewed")), 0);
  const json held = c.Held();
  ASSERT_EQ(held["locks"].size(), 1u);
  EXPECT_TRUE(held["locks"][0]["renew"].get<bool>());
}

TEST_F(LockOpsTest, NonRenewedLockExpiresAndIsReportedLost) {
  auto c = agent_.Connect();
  const json r = c.Acquire("short", 300, 0);
  ASSERT_TRUE(r.value("ok", false));
  const auto ev = c.NextEvent(milliseconds(2'000));
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ((*ev)["event"], "lost");
  EXPECT_EQ((*ev)["reason"], "expired");
  EXPECT_EQ(c.Held()["locks"].size(), 0u);
  // Someone else can have it now.
  auto d = agent_.Connect();
  EXPECT_TRUE(d.Acquire("short", 1'000, 1'000).value("ok", false));
}

TEST_F(LockOpsTest, BadRequestsGetClearErrorsAndTheConnectionLivesOn) {
  auto c = agent_.Connect();
  c.SendRaw("this is not json\n");
  json e = json::parse(*c.ReadLine(milliseconds(2'000)));
  EXPECT_EQ(e["error"], "bad_request");
  EXPECT_FALSE(e["message"].get<std::string>().empty());

  e = c.Call({{"id", 7}, {"op", "acquire"}, {"resource", "r"}, {"ttl_ms", -5}});
  EXPECT_EQ(e["error"], "bad_request");
  EXPECT_EQ(e["id"], 7);
  e = c.Call({{"op", "frobnicate"}});
  EXPECT_EQ(e["error"], "bad_request");
  e = c.Call({{"op", "acquire"}, {"resource", std::string(300, 'r')}});
  EXPECT_EQ(e["error"], "bad_request");

  c.SendRaw(std::string(70'000, 'x') + "\n");  // over the 64 KiB line limit
  e = json::parse(*c.ReadLine(milliseconds(2'000)));
  EXPECT_EQ(e["error"], "bad_request");
  EXPECT_TRUE(c.Ping().value("ok", false));
}

TEST_F(LockOpsTest, PipelinedRequestsOnOneConnectionAreAllAnswered) {
  auto c = agent_.Connect();
  std::string batch;
  for (int i = 0; i < 50; ++i) {
    batch += json{{"id", i}, {"op", "acquire"}, {"resource", "p" + std::to_string(i)}}.dump() +
             "\n";
  }
  c.SendRaw(batch);
  std::set<int> seen;
  for (int i = 0; i < 50; ++i) {
    const json r = json::parse(*c.ReadLine(milliseconds(5'000)));
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    seen.insert(r["id"].get<int>());
  }
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_EQ(c.Held()["locks"].size(), 50u);
}

TEST_F(LockOpsTest, HealthReportsEveryMaster) {
  auto c = agent_.Connect();
  const json h = c.Health();
  EXPECT_EQ(h["quorum"], 3);
  ASSERT_EQ(h["nodes"].size(), 5u);
  for (const auto& n : h["nodes"]) EXPECT_TRUE(n["up"].get<bool>());
}

}  // namespace
}  // namespace lw::test
