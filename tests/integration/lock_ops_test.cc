// Lock operations against 5 real redis-server masters and a real agent process.

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <thread>

#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::lock_ops {
namespace {

using nlohmann::json;

class LockOpsTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{5};
  AgentProcess agent_{cluster_};
};

TEST_F(LockOpsTest, GrantWritesTheTokenOnEveryMasterAndReleaseRemovesIt) {
  auto c = agent_.Connect();
  const auto asked = SteadyClock::now();
  const json r = c.Acquire("orders:1001", 30'000, 0);
  const double took = MsSince(asked);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  const std::string token = r["token"];
  EXPECT_EQ(token.size(), 40u);
  EXPECT_EQ(r["resource"], "orders:1001");
  // validity = ttl - drift (300 + 2 ms) - the time the masters took, which is part of `took`
  // (and 3 ms for the agent's whole-millisecond rounding).
  EXPECT_LE(r["validity_ms"].get<int64_t>(), 30'000 - 302);
  EXPECT_GE(r["validity_ms"].get<double>(), 30'000 - 302 - took - 3);
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("orders:1001"), token, 5), 5);
  for (int i = 0; i < 5; ++i) {
    const int64_t pttl = cluster_.Pttl(i, KeyOf("orders:1001"));
    EXPECT_GE(pttl, 30'000 - MsSince(asked) - 2);  // set with PX 30000 after `asked`
    EXPECT_LE(pttl, 30'000);
  }

  const json rel = c.Release("orders:1001", token);
  EXPECT_TRUE(rel.value("ok", false)) << rel.dump();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("orders:1001")), 0);
}

TEST_F(LockOpsTest, ContenderTimesOutWhileHeldThenGetsItAfterRelease) {
  auto a = agent_.Connect();
  auto b = agent_.Connect();
  constexpr int kHeldMs = 30'000;
  const json ra = a.Acquire("res", kHeldMs, 0);
  ASSERT_TRUE(ra.value("ok", false));

  const auto t0 = SteadyClock::now();
  const json rb = b.Acquire("res", 10'000, 200);
  const double waited = MsSince(t0);
  EXPECT_FALSE(rb.value("ok", true));
  EXPECT_EQ(rb["error"], "timeout") << rb.dump();
  EXPECT_GE(waited, 199) << "gave up before its wait_ms";
  EXPECT_LT(waited, kHeldMs / 2) << "waited for the holder rather than its own wait_ms";
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("res"), ra["token"], 5), 5);

  ASSERT_TRUE(a.Release("res", ra["token"]).value("ok", false));
  const json rb2 = b.Acquire("res", 10'000, 0);
  ASSERT_TRUE(rb2.value("ok", false)) << rb2.dump();
  EXPECT_NE(rb2["token"], ra["token"]);
}

TEST_F(LockOpsTest, KeyHeldOutsideThisAgentIsRespectedAndTimesOut) {
  // Another agent (simulated by writing the keys directly) holds the lock on 3 of 5, for far
  // longer than this test can take.
  for (int i = 0; i < 3; ++i) cluster_.Set(i, KeyOf("foreign"), "someone-else", 600'000);
  auto c = agent_.Connect();
  const json r = c.Acquire("foreign", 5'000, 300);
  EXPECT_EQ(r["error"], "timeout") << r.dump();
  // Our failed attempts were undone on the masters that had said yes.
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("foreign")) == 3; },
                         milliseconds(10'000)));
  EXPECT_EQ(cluster_.AwaitHolding(KeyOf("foreign"), "someone-else", 3), 3);
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
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("x"), r["token"], 5), 5);
  // Released once: a second release is not_held.
  EXPECT_TRUE(c.Release("x", r["token"]).value("ok", false));
  EXPECT_EQ(c.Release("x", r["token"])["error"], "not_held");
}

TEST_F(LockOpsTest, ExtendPushesTheExpiryOnEveryMaster) {
  auto c = agent_.Connect();
  const json r = c.Acquire("ext", 10'000, 0);
  ASSERT_TRUE(r.value("ok", false));
  const auto asked = SteadyClock::now();
  const json e = c.Extend("ext", r["token"], 40'000);
  ASSERT_TRUE(e.value("ok", false)) << e.dump();
  // Counted from the extension (after `asked`): longer than anything the 10 s ttl could give.
  EXPECT_GE(e["validity_ms"].get<double>(), 40'000 - 402 - MsSince(asked) - 3);
  for (int i = 0; i < 5; ++i) {
    // Read the ttl before the clock: the bound must be taken after the master answered.
    const int64_t pttl = cluster_.Pttl(i, KeyOf("ext"));
    EXPECT_GE(pttl, 40'000 - MsSince(asked) - 2) << "master " << i;
  }
  const json held = c.Held();
  ASSERT_EQ(held["locks"].size(), 1u);
  EXPECT_EQ(held["locks"][0]["resource"], "ext");
  EXPECT_GE(held["locks"][0]["validity_ms"].get<double>(), 40'000 - 402 - MsSince(asked) - 3);
}

TEST_F(LockOpsTest, DisconnectDeletesTheKeysOnEveryMasterRatherThanLettingThemExpire) {
  constexpr int kTtlMs = 60'000;
  std::string token;
  {
    auto c = agent_.Connect();
    const json r = c.Acquire("crash", kTtlMs, 0);
    ASSERT_TRUE(r.value("ok", false));
    token = r["token"];
    ASSERT_EQ(cluster_.AwaitHoldingGrant(KeyOf("crash"), token, 5), 5);
  }  // connection closed, as when the app crashes
  const auto closed = SteadyClock::now();
  // Deleted: gone long before the 60 s ttl could have expired them.
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("crash")) == 0; },
                         milliseconds(kTtlMs / 4)))
      << "keys still present " << MsSince(closed) << " ms after disconnect";
}

TEST_F(LockOpsTest, LocalWaitersAreServedInFifoOrder) {
  auto holder = agent_.Connect();
  const json h = holder.Acquire("fifo", 60'000, 0);
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
    const json g = waiters[i].Call({{"id", "acq"}}, milliseconds(15'000));
    ASSERT_TRUE(g.value("ok", false)) << "waiter " << i << ": " << g.dump();
    for (int j = i + 1; j < 3; ++j) {
      EXPECT_FALSE(waiters[j].ReadLine(milliseconds(30)).has_value())
          << "waiter " << j << " was answered before waiter " << i << " released";
    }
    ASSERT_TRUE(waiters[i].Release("fifo", g["token"]).value("ok", false));
  }
}

TEST_F(LockOpsTest, RenewKeepsALockAliveForSeveralTtls) {
  auto c = agent_.Connect();
  // A 3 s ttl, renewed every second: each renewal has 2 s to be answered by a quorum before
  // the lock would be lost, which no load of the box comes near.
  constexpr int kTtlMs = 3'000;
  const json r = c.Acquire("renewed", kTtlMs, 0, /*renew=*/true);
  ASSERT_TRUE(r.value("ok", false));
  // No lost event may arrive during 3 ttls; waiting out the time is the test.
  const auto ev = c.NextEvent(milliseconds(3 * kTtlMs));
  EXPECT_FALSE(ev.has_value()) << ev->dump();
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("renewed"), r["token"], 5), 5);
  EXPECT_GT(cluster_.Pttl(0, KeyOf("renewed")), 0);
  const json held = c.Held();
  ASSERT_EQ(held["locks"].size(), 1u);
  EXPECT_TRUE(held["locks"][0]["renew"].get<bool>());
}

TEST_F(LockOpsTest, NonRenewedLockExpiresAndIsReportedLost) {
  auto c = agent_.Connect();
  const json r = c.Acquire("short", 1'000, 0);  // the fixture's shortest ttl
  ASSERT_TRUE(r.value("ok", false));
  const auto ev = c.NextEvent(milliseconds(15'000));
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ((*ev)["event"], "lost");
  EXPECT_EQ((*ev)["reason"], "expired");
  EXPECT_EQ(c.Held()["locks"].size(), 0u);
  // Someone else can have it now.
  auto d = agent_.Connect();
  EXPECT_TRUE(d.Acquire("short", 1'000, 10'000).value("ok", false));
}

TEST_F(LockOpsTest, BadRequestsGetClearErrorsAndTheConnectionLivesOn) {
  auto c = agent_.Connect();
  c.SendRaw("this is not json\n");
  std::optional<std::string> line = c.ReadLine(milliseconds(10'000));
  ASSERT_TRUE(line.has_value()) << "no reply to a line that is not JSON";
  json e = json::parse(*line);
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
  line = c.ReadLine(milliseconds(10'000));
  ASSERT_TRUE(line.has_value()) << "no reply to a line over the limit";
  e = json::parse(*line);
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
    const std::optional<std::string> line = c.ReadLine(milliseconds(10'000));
    ASSERT_TRUE(line.has_value()) << "reply " << i << " of 50 never came";
    const json r = json::parse(*line);
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
}  // namespace lw::test::lock_ops
