// Cross-agent hand-off: a release through one agent is announced on the masters
// (PUBLISH lockwarden:released:<key>), and a waiter backing off in another agent tries again at
// once instead of sleeping out its retry delay. Two real agents over 5 real masters.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <csignal>
#include <future>
#include <sstream>
#include <utility>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::handoff {
namespace {

using nlohmann::json;

// Where a test checks that the announcement woke the waiter, the waiting agent retries only
// after 20 s (no jitter): a grant well within 10 s of the wait's start was the announcement's
// doing, however loaded the box. Where a test checks the fallback to the retry timer, 3 s: the
// grant cannot come sooner (a lower bound the timer guarantees).
constexpr int kNoRetryMs = 20'000;
constexpr int kFallbackRetryMs = 3'000;
const std::string kChannel = "lockwarden:released:lock:r";

std::vector<std::string> SlowRetry(int retry_delay_ms) {
  return {"--retry-delay-ms", std::to_string(retry_delay_ms), "--retry-jitter-ms", "0"};
}

std::vector<std::string> UrlsAs(const RedisCluster& cluster, const std::string& user) {
  std::vector<std::string> urls;
  for (int i = 0; i < cluster.size(); ++i) {
    urls.push_back("redis://" + user + ":secret@127.0.0.1:" + std::to_string(cluster.port(i)));
  }
  return urls;
}

// Clients of master i in subscribe mode (CLIENT LIST TYPE pubsub); -1 when it does not answer.
int PubSubClients(const RedisCluster& cluster, int i) {
  redisContext* ctx = redisConnect("127.0.0.1", cluster.port(i));
  if (ctx == nullptr || ctx->err) {
    if (ctx) redisFree(ctx);
    return -1;
  }
  auto* r = static_cast<redisReply*>(redisCommand(ctx, "CLIENT LIST TYPE pubsub"));
  int n = -1;
  if (r != nullptr && r->type == REDIS_REPLY_STRING) {
    std::istringstream lines(std::string(r->str, r->len));
    std::string line;
    for (n = 0; std::getline(lines, line);) n += line.empty() ? 0 : 1;
  }
  if (r) freeReplyObject(r);
  redisFree(ctx);
  return n;
}

// What the waiting client saw.
struct Wait {
  json reply;
  SteadyClock::time_point answered;
};

// A client of `agent` asks for "r" with wait_ms 40 s (longer than any retry delay here,
// shorter than the client's 60 s call timeout), on its own thread.
std::future<Wait> WaitFor(const AgentProcess& agent) {
  return std::async(std::launch::async, [&agent] {
    auto c = agent.Connect();
    json reply = c.Acquire("r", 10'000, 40'000);
    return Wait{std::move(reply), SteadyClock::now()};
  });
}

// True once every master but `skip` counts a subscriber on kChannel.
bool EveryMasterListens(const RedisCluster& cluster, int skip = -1) {
  for (int i = 0; i < cluster.size(); ++i) {
    if (i != skip && cluster.NumSub(i, kChannel) < 1) return false;
  }
  return true;
}

class HandoffTest : public ::testing::Test {
 protected:
  // a holds "r"; a client of b waits for it; once b listens for its release, a releases.
  // Returns ms from the start of b's wait to its grant (the test fails if there was none).
  double HandOff(AgentProcess& a, AgentProcess& b, int skip = -1) {
    auto holder = a.Connect();
    const json held = holder.Acquire("r", 30'000, 0);
    EXPECT_TRUE(held.value("ok", false)) << held.dump();
    const auto asked = SteadyClock::now();
    auto waiting = WaitFor(b);
    if (!Eventually([&] { return EveryMasterListens(cluster_, skip); },
                    milliseconds(kNoRetryMs / 4))) {
      ADD_FAILURE() << "b never listened for the release\n" << b.Log();
      return 1e9;
    }
    const json released = holder.Release("r", held["token"]);
    EXPECT_TRUE(released.value("ok", false)) << released.dump();
    const Wait w = waiting.get();
    EXPECT_TRUE(w.reply.value("ok", false)) << w.reply.dump() << b.Log();
    return std::chrono::duration<double, std::milli>(w.answered - asked).count();
  }

  RedisCluster cluster_{5};
};

TEST_F(HandoffTest, AReleaseInOneAgentWakesTheWaiterInAnotherAtOnce) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_, SlowRetry(kNoRetryMs));
  // Lazy: nothing is watched yet, so neither agent holds a release subscribe connection; each
  // holds only the one of its fleet revoke channel.
  for (int i = 0; i < cluster_.size(); ++i) {
    EXPECT_TRUE(Eventually([&] { return PubSubClients(cluster_, i) == 2; }, milliseconds(5'000)))
        << "master " << i << ": " << PubSubClients(cluster_, i) << " subscribe connections";
  }

  const double ms = HandOff(a, b);
  EXPECT_LT(ms, kNoRetryMs / 2) << "the grant waited for the retry timer, not the announcement\n"
                                << b.Log();
  EXPECT_GE(MetricNow(b.admin_port(), "lockwarden_release_wakeups_total"), 1);
  // Nobody in b wants "r" any more (its client closed): the subscriptions end.
  EXPECT_TRUE(Eventually(
      [&] {
        for (int i = 0; i < cluster_.size(); ++i) {
          if (cluster_.NumSub(i, kChannel) != 0) return false;
        }
        return true;
      },
      milliseconds(15'000)));
  // Its connections linger for 30 s in case another wait comes; shutdown must not wait for them.
  const auto stopping = SteadyClock::now();
  b.Signal(SIGTERM);
  EXPECT_EQ(b.WaitExit(milliseconds(25'000)), 0) << b.Log();
  EXPECT_LT(MsSince(stopping), 15'000) << "the shutdown waited for the idle subscribe connections";
}

TEST_F(HandoffTest, TheOtherMastersAnnouncementsSufficeWhileOneIsStopped) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_, SlowRetry(kNoRetryMs));
  cluster_.Stop(4);
  const double ms = HandOff(a, b, /*skip=*/4);
  EXPECT_LT(ms, kNoRetryMs / 2) << b.Log();
  cluster_.Cont(4);
}

TEST_F(HandoffTest, AUserWhoMayNotPublishStillReleasesAndWaitersFallBackToTheirRetry) {
  for (int i = 0; i < cluster_.size(); ++i) {
    cluster_.Run(i,
                 {"ACL", "SETUSER", "releaser", "on", ">secret", "~*", "&*", "+@all", "-publish"});
  }
  AgentProcess a(UrlsAs(cluster_, "releaser"));
  AgentProcess b(cluster_, SlowRetry(kFallbackRetryMs));
  auto holder = a.Connect();
  const json held = holder.Acquire("r", 30'000, 0);
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  const auto asked_at = SteadyClock::now();
  auto waiting = WaitFor(b);
  ASSERT_TRUE(Eventually([&] { return EveryMasterListens(cluster_); }, milliseconds(15'000)));
  const json released = holder.Release("r", held["token"]);
  ASSERT_TRUE(released.value("ok", false)) << released.dump() << a.Log();
  // (b's retry may already have taken it again: only a's token must be gone.)
  EXPECT_EQ(cluster_.CountHoldingGrant(KeyOf("r"), held["token"]), 0)
      << "the release deleted the key everywhere";
  const Wait w = waiting.get();
  EXPECT_TRUE(w.reply.value("ok", false)) << w.reply.dump();
  // Nothing was announced, so the waiter got it on its retry timer.
  EXPECT_GE(MsSince(asked_at) - MsSince(w.answered), kFallbackRetryMs - 100);
  EXPECT_EQ(MetricNow(b.admin_port(), "lockwarden_release_wakeups_total"), 0);
}

TEST_F(HandoffTest, AWaiterWhoMayNotSubscribeFallsBackToItsRetry) {
  for (int i = 0; i < cluster_.size(); ++i) {
    cluster_.Run(i, {"ACL", "SETUSER", "waiter", "on", ">secret", "~*", "resetchannels", "+@all"});
  }
  AgentProcess a(cluster_);
  AgentProcess b(UrlsAs(cluster_, "waiter"), SlowRetry(kFallbackRetryMs));
  auto holder = a.Connect();
  const json held = holder.Acquire("r", 30'000, 0);
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  const auto asked_at = SteadyClock::now();
  auto waiting = WaitFor(b);
  ASSERT_TRUE(
      Eventually(
          [&] {
            return b.Log().find("refused the subscription to release announcements") !=
                   std::string::npos;
          },
          milliseconds(15'000)))
      << b.Log();
  ASSERT_TRUE(holder.Release("r", held["token"]).value("ok", false));
  const Wait w = waiting.get();
  EXPECT_TRUE(w.reply.value("ok", false)) << w.reply.dump() << b.Log();
  EXPECT_GE(MsSince(asked_at) - MsSince(w.answered), kFallbackRetryMs - 100);
  EXPECT_TRUE(b.WaitReady(milliseconds(10'000))) << "the refusal costs the agent nothing else";
}

}  // namespace
}  // namespace lw::test::handoff
