// Semaphores and shared (read) holds against 5 real redis-server masters and real agents:
// K permits across agents, a permit freed to the next waiter, a mismatched kind or size
// refused, readers sharing, an exclusive hold excluding them, a waiting writer stopping new
// readers (in the fleet and, by FIFO, inside one agent), session close and renewal, fences per
// permit, and the bad combinations of fields.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <string>

#include "metrics_util.h"
#include "state_util.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::kinds_test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The waiting agents here retry only after 20 s: a grant well before that was the release's
// doing (its announcement, or the local queue), however loaded the box.
constexpr int kNoRetryMs = 20'000;
const std::vector<std::string> kSlowRetry = {"--retry-delay-ms", std::to_string(kNoRetryMs),
                                             "--retry-jitter-ms", "0"};
const std::string kSep = "\x1f";

json Acquire(client::Client& c, const std::string& resource, json extra, int64_t ttl_ms = 10'000,
             int64_t wait_ms = 0) {
  json request = {{"op", "acquire"}, {"resource", resource}, {"ttl_ms", ttl_ms},
                  {"wait_ms", wait_ms}};
  request.update(extra);
  return c.Call(request);
}

// An acquire on its own connection and thread, waiting up to 40 s.
std::future<json> AcquireLater(const AgentProcess& agent, const std::string& resource,
                               json extra) {
  return std::async(std::launch::async, [&agent, resource, extra] {
    auto c = agent.Connect();
    json reply = Acquire(c, resource, extra, 10'000, 40'000);
    if (reply.value("ok", false)) c.Release(resource, reply["token"]);
    return reply;
  });
}

bool Ready(const std::future<json>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

class KindsTest : public ::testing::Test {
 protected:
  // True once a quorum of masters count a subscriber for the releases of `resource`.
  bool QuorumListens(const std::string& resource) {
    int n = 0;
    for (int i = 0; i < cluster_.size(); ++i) {
      n += cluster_.NumSub(i, "lockwarden:released:lock:" + resource) >= 1 ? 1 : 0;
    }
    return n >= 3;
  }

  RedisCluster cluster_{5};
};

TEST_F(KindsTest, ASemaphoreAdmitsKHoldersAcrossAgentsAndTheNextWhenOneIsReleased) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_, kSlowRetry);
  auto c1 = a.Connect();
  auto c2 = b.Connect();
  auto c3 = b.Connect();
  const json r1 = Acquire(c1, "pool", {{"permits", 2}});
  const json r2 = Acquire(c2, "pool", {{"permits", 2}});
  ASSERT_TRUE(r1.value("ok", false)) << r1.dump();
  ASSERT_TRUE(r2.value("ok", false)) << r2.dump();
  EXPECT_EQ(r1["mode"], "permit");
  EXPECT_NE(r1["permit"], r2["permit"]);
  const json r3 = Acquire(c3, "pool", {{"permits", 2}});
  ASSERT_FALSE(r3.value("ok", true)) << r3.dump();
  EXPECT_EQ(r3["error"], "timeout") << r3.dump();
  for (int m = 0; m < cluster_.size(); ++m) {
    EXPECT_EQ(cluster_.Get(m, "lock:pool"), "lockwarden:semaphore:2") << "master " << m;
    EXPECT_GT(cluster_.Pttl(m, "lock:pool"), 0) << "the marker expires";
  }
  const std::string permit1 = "lock:pool" + kSep + "permit:" + r1["permit"].dump();
  EXPECT_EQ(cluster_.AwaitHoldingGrant(permit1, r1["token"], 5), 5);

  auto waiting = AcquireLater(b, "pool", {{"permits", 2}});
  ASSERT_TRUE(Eventually([&] { return QuorumListens("pool"); }, milliseconds(kNoRetryMs / 4)))
      << b.Log();
  const auto released = SteadyClock::now();
  EXPECT_TRUE(c1.Release("pool", r1["token"]).value("ok", false));
  const json r4 = waiting.get();
  ASSERT_TRUE(r4.value("ok", false)) << r4.dump() << b.Log();
  EXPECT_EQ(r4["permit"], r1["permit"]) << "the permit released is the one free";
  EXPECT_LT(MsSince(released), kNoRetryMs / 2) << "the grant waited for the retry timer";
}

TEST_F(KindsTest, AnotherSizeOrKindOfTheSameResourceIsRefusedWithKindMismatch) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_);
  auto holder = a.Connect();
  ASSERT_TRUE(Acquire(holder, "pool", {{"permits", 2}}).value("ok", false));
  auto other = b.Connect();
  const json bigger = Acquire(other, "pool", {{"permits", 3}});
  EXPECT_EQ(bigger["error"], "kind_mismatch") << bigger.dump();
  EXPECT_THAT(bigger.value("message", ""), HasSubstr("semaphore of 2 permits"));
  auto local = a.Connect();
  const json here = Acquire(local, "pool", {{"permits", 3}});
  EXPECT_EQ(here["error"], "kind_mismatch") << here.dump();
  EXPECT_THAT(here.value("message", ""), HasSubstr("through this agent"));
  const json reader = Acquire(other, "pool", {{"shared", true}});
  EXPECT_EQ(reader["error"], "kind_mismatch") << reader.dump();
  const json exclusive = Acquire(other, "pool", json::object());
  EXPECT_EQ(exclusive["error"], "kind_mismatch") << exclusive.dump();

  // And the other way round: a lock held exclusively is no semaphore.
  ASSERT_TRUE(Acquire(holder, "plain", json::object()).value("ok", false));
  const json permit = Acquire(other, "plain", {{"permits", 2}});
  EXPECT_EQ(permit["error"], "kind_mismatch") << permit.dump();
  EXPECT_THAT(permit.value("message", ""), HasSubstr("a lock held exclusively"));
}

TEST_F(KindsTest, AnAcquireThatCouldOnlyWaitForItsOwnHoldIsRefusedAtOnceWithWouldDeadlock) {
  AgentProcess a(cluster_);
  auto c = a.Connect();
  const json held = Acquire(c, "mine", json::object());
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  const std::string token = held["token"];
  // Asked again by the same connection with a long wait: refused, not queued for 30 s.
  const json again = Acquire(c, "mine", json::object(), 10'000, 30'000);
  EXPECT_EQ(again["error"], "would_deadlock") << again.dump();
  EXPECT_THAT(again.value("message", ""), HasSubstr("held by this session already"));
  EXPECT_THAT(again.value("message", ""), HasSubstr("exclusive hold"));
  EXPECT_THAT(again.value("message", ""), HasSubstr("token " + token.substr(0, 8)));
  // Another connection still queues for it, and times out.
  auto d = a.Connect();
  EXPECT_EQ(Acquire(d, "mine", json::object(), 10'000, 200)["error"], "timeout");
  // The refusal left nothing behind: once released, the same connection takes it again.
  ASSERT_TRUE(c.Release("mine", token).value("ok", false));
  EXPECT_TRUE(Acquire(c, "mine", json::object()).value("ok", false));

  // A read hold beside its own read hold is granted; a write hold beside it would wait for it.
  ASSERT_TRUE(Acquire(c, "doc", {{"shared", true}}).value("ok", false));
  EXPECT_TRUE(Acquire(c, "doc", {{"shared", true}}).value("ok", false));
  const json write = Acquire(c, "doc", json::object(), 10'000, 30'000);
  EXPECT_EQ(write["error"], "would_deadlock") << write.dump();
  EXPECT_THAT(write.value("message", ""), HasSubstr("shared hold"));

  // A permit beside fewer than K of its own is granted; beside all K it would wait for itself.
  ASSERT_TRUE(Acquire(c, "pair", {{"permits", 2}}).value("ok", false));
  EXPECT_TRUE(Acquire(c, "pair", {{"permits", 2}}).value("ok", false));
  const json third = Acquire(c, "pair", {{"permits", 2}}, 10'000, 30'000);
  EXPECT_EQ(third["error"], "would_deadlock") << third.dump();
  EXPECT_THAT(third.value("message", ""), HasSubstr("permit hold"));
}

TEST_F(KindsTest, OwnersOfOneConnectionWaitForEachOtherAndAReentrantHoldCountsItsAcquires) {
  AgentProcess a(cluster_);
  auto c = a.Connect();
  const json held = Acquire(c, "owned", {{"owner", 1}});
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  const std::string token = held["token"];
  EXPECT_EQ(Acquire(c, "owned", {{"owner", 1}}, 10'000, 30'000)["error"], "would_deadlock");
  // Owner 2 of the same connection is another caller: it queues, and times out.
  EXPECT_EQ(Acquire(c, "owned", {{"owner", 2}}, 10'000, 200)["error"], "timeout");
  // Owner 1 again, reentrant: the same grant, two acquires deep; no second hold anywhere.
  const json again = Acquire(c, "owned", {{"owner", 1}, {"reentrant", true}}, 10'000, 0);
  ASSERT_TRUE(again.value("ok", false)) << again.dump();
  EXPECT_EQ(again["token"], token);
  EXPECT_EQ(again["depth"], 2);
  EXPECT_EQ(again["waited_ms"], 0);
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("owned"), token, 5), 5);
  // The first release lowers the depth and keeps the lock on the masters.
  const json first = c.Release("owned", token);
  EXPECT_EQ(first, json({{"id", first["id"]}, {"ok", true}, {"depth", 1}})) << first.dump();
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("owned"), token, 5), 5);
  auto d = a.Connect();
  EXPECT_EQ(Acquire(d, "owned", json::object(), 10'000, 200)["error"], "timeout");
  // The second lets go of it.
  const json second = c.Release("owned", token);
  EXPECT_EQ(second, json({{"id", second["id"]}, {"ok", true}})) << second.dump();
  EXPECT_EQ(cluster_.CountHoldingGrant(KeyOf("owned"), token), 0);
  EXPECT_TRUE(Acquire(d, "owned", json::object()).value("ok", false));
  // reentrant is for exclusive holds this connection can hold.
  const json bad = Acquire(c, "owned2", {{"reentrant", true}, {"shared", true}});
  EXPECT_EQ(bad["error"], "bad_request") << bad.dump();
}

TEST_F(KindsTest, ReadersShareAnExclusiveHoldExcludesThemAndAWaitingWriterStopsNewReaders) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_);
  AgentProcess w(cluster_, kSlowRetry);
  auto ra = a.Connect();
  auto rb = b.Connect();
  const json r1 = Acquire(ra, "cfg", {{"shared", true}});
  const json r2 = Acquire(rb, "cfg", {{"shared", true}});
  ASSERT_TRUE(r1.value("ok", false)) << r1.dump();
  ASSERT_TRUE(r2.value("ok", false)) << r2.dump();
  EXPECT_EQ(r1["mode"], "shared");
  const std::string readers = "lock:cfg" + kSep + "readers";
  for (int m = 0; m < cluster_.size(); ++m) {
    EXPECT_EQ(cluster_.ZRange(m, readers).size(), 2u) << "master " << m;
    EXPECT_GT(cluster_.Pttl(m, readers), 0) << "the readers set expires";
  }
  auto wc = w.Connect();
  const json refused = Acquire(wc, "cfg", json::object());
  EXPECT_EQ(refused["error"], "timeout") << refused.dump();
  EXPECT_THAT(refused.value("message", ""), HasSubstr("readers hold it"));

  auto writer = AcquireLater(w, "cfg", json::object());
  const std::string waiting_key = "lock:cfg" + kSep + "writer-waiting";
  ASSERT_TRUE(Eventually([&] { return cluster_.CountWithKey(waiting_key) >= 3; },
                         milliseconds(kNoRetryMs / 4)));
  ASSERT_TRUE(Eventually([&] { return QuorumListens("cfg"); }, milliseconds(kNoRetryMs / 4)))
      << w.Log();
  auto late = a.Connect();
  const json late_reader = Acquire(late, "cfg", {{"shared", true}});
  EXPECT_EQ(late_reader["error"], "timeout") << "a waiting writer lets no new reader in: "
                                             << late_reader.dump();
  EXPECT_THAT(late_reader.value("message", ""), HasSubstr("a writer waits"));
  EXPECT_FALSE(Ready(writer)) << "readers still hold it";
  const auto released = SteadyClock::now();
  EXPECT_TRUE(ra.Release("cfg", r1["token"]).value("ok", false));
  EXPECT_TRUE(rb.Release("cfg", r2["token"]).value("ok", false));
  const json granted = writer.get();
  ASSERT_TRUE(granted.value("ok", false)) << granted.dump() << w.Log();
  EXPECT_FALSE(granted.contains("mode")) << "an exclusive hold says nothing more than a mutex's";
  EXPECT_LT(MsSince(released), kNoRetryMs / 2) << "the grant waited for the retry timer";
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey(waiting_key) == 0; },
                         milliseconds(5'000)))
      << "the writer's grant removes its waiting mark, on the masters that refused it too";
}

// Inside one agent, a queued writer is not overtaken by a later reader: an engine decision,
// unit-tested against fake masters (tests/unit/lock_engine_kinds_test.cc).

TEST_F(KindsTest, RenewalKeepsPermitsAndReadHoldsAndClosingTheSessionReleasesThem) {
  AgentProcess a(cluster_);
  auto c = a.Connect();
  const json p = Acquire(c, "pool", {{"permits", 3}, {"renew", true}}, 1000);
  const json s = Acquire(c, "cfg", {{"shared", true}, {"renew", true}}, 1000);
  ASSERT_TRUE(p.value("ok", false)) << p.dump();
  ASSERT_TRUE(s.value("ok", false)) << s.dump();
  ASSERT_TRUE(Eventually(
      [&] {
        return MetricNow(a.admin_port(), "lockwarden_renewals_total", {{"outcome", "extended"}}) >=
               6;
      },
      milliseconds(10'000)))
      << "three renewals each";
  const std::string permit = "lock:pool" + kSep + "permit:" + p["permit"].dump();
  const std::string readers = "lock:cfg" + kSep + "readers";
  EXPECT_EQ(cluster_.AwaitHoldingGrant(permit, p["token"], 5), 5) << "renewed past its ttl";
  EXPECT_EQ(cluster_.CountWithKey(readers), 5) << "renewed past its ttl";
  const json held = c.Held();
  ASSERT_EQ(held["locks"].size(), 2u) << held.dump();
  c.Close();
  EXPECT_TRUE(Eventually(
      [&] { return cluster_.CountWithKey(permit) == 0 && cluster_.CountWithKey(readers) == 0; },
      milliseconds(5'000)))
      << "closing the session released both holds";
}

TEST_F(KindsTest, FencesArePerPermitAndBadCombinationsAreRefused) {
  AgentProcess a(cluster_);
  auto c = a.Connect();
  for (int64_t expected = 1; expected <= 2; ++expected) {
    const json r = Acquire(c, "solo", {{"permits", 1}, {"fence", true}});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    EXPECT_EQ(r["fence"], expected);
    EXPECT_EQ(r["permit"], 0);
    ASSERT_TRUE(c.Release("solo", r["token"]).value("ok", false));
  }
  EXPECT_EQ(cluster_.Get(0, "fence:solo" + kSep + "permit:0"), "2");
  const struct {
    json extra;
    const char* field;
  } bad[] = {{{{"permits", 2}, {"shared", true}}, "\"shared\""},
             {{{"shared", true}, {"fence", true}}, "\"fence\""},
             {{{"permits", 0}}, "\"permits\""},
             {{{"permits", 5000}}, "\"permits\""},
             {{{"permits", "2"}}, "\"permits\""},
             {{{"shared", 1}}, "\"shared\""}};
  for (const auto& b : bad) {
    const json r = Acquire(c, "x", b.extra);
    EXPECT_EQ(r["error"], "bad_request") << b.extra.dump() << " -> " << r.dump();
    EXPECT_THAT(r.value("message", ""), HasSubstr(b.field)) << r.dump();
  }
  EXPECT_TRUE(c.Ping().value("ok", false)) << "the session survives its bad requests";
}

}  // namespace
}  // namespace lw::test::kinds_test
