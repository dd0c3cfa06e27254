// redis/subscriber on its own libuv loop against a real redis-server: lazy connect, messages,
// idle close, re-subscribe after a restart, and a clean Stop; and ReleaseSubscribers' counted
// watches (several users of one key, each with balanced Watch/Unwatch).

#include "redis/subscriber.h"

#include "redis/release_subscribers.h"
#include "redis/scripts.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::subscriber {
namespace {

// One command on a fresh blocking connection to 127.0.0.1:port; nullptr when unanswered.
std::unique_ptr<redisReply, void (*)(void*)> Ask(int port, const std::string& command) {
  std::unique_ptr<redisReply, void (*)(void*)> none(nullptr, freeReplyObject);
  redisContext* ctx = redisConnect("127.0.0.1", port);
  if (ctx == nullptr || ctx->err) {
    if (ctx) redisFree(ctx);
    return none;
  }
  auto* r = static_cast<redisReply*>(redisCommand(ctx, command.c_str()));
  redisFree(ctx);
  return {r, freeReplyObject};
}

// Connections to the master other than the one asking; -1 when it does not answer.
int OtherClients(int port) {
  auto r = Ask(port, "CLIENT LIST");
  if (!r || r->type != REDIS_REPLY_STRING) return -1;
  std::istringstream lines(std::string(r->str, r->len));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) n += line.empty() ? 0 : 1;
  return n - 1;
}

// For something the subscriber or Redis does on its own: generous, it only ends a failing test.
constexpr milliseconds kDeadline{10'000};

class SubscriberTest : public ::testing::Test {
 protected:
  SubscriberTest() { uv_loop_init(&loop_); }
  ~SubscriberTest() override {
    subscriber_.reset();
    // Every handle closes: nothing keeps the loop alive or leaks.
    EXPECT_TRUE(RunUntil([&] { return uv_loop_alive(&loop_) == 0; }, kDeadline));
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  void Make(int64_t idle_close_ms = 30'000) {
    MasterAddress address{"127.0.0.1", cluster_.port(0), "", "", {}};
    subscriber_ = std::make_unique<Subscriber>(
        &loop_, address, SubscriberOptions{500, 200, idle_close_ms},
        [this](const std::string& channel, const std::string& message) {
          heard_.push_back(channel);
          payloads_.push_back(message);
        });
  }

  // Turns the loop until `condition` holds (checked between turns) or `deadline` passes.
  bool RunUntil(const std::function<bool()>& condition, milliseconds deadline) {
    const auto end = SteadyClock::now() + deadline;
    for (;;) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      if (condition()) return true;
      if (SteadyClock::now() >= end) return false;
      std::this_thread::sleep_for(milliseconds(2));
    }
  }

  void Publish(const std::string& channel) {
    auto r = Ask(cluster_.port(0), "PUBLISH " + channel + " x");
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
  }

  RedisCluster cluster_{1};
  uv_loop_t loop_;
  std::unique_ptr<Subscriber> subscriber_;
  std::vector<std::string> heard_;
  std::vector<std::string> payloads_;  // of each message heard, in order
};

TEST_F(SubscriberTest, ConnectsOnlyWhileAChannelIsWantedAndClosesWhenIdle) {
  constexpr int kIdleCloseMs = 1000;
  Make(kIdleCloseMs);
  EXPECT_FALSE(RunUntil([&] { return OtherClients(cluster_.port(0)) != 0; }, milliseconds(200)))
      << "no channel, no connection";
  subscriber_->Subscribe("c1");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c1") == 1; }, kDeadline));
  Publish("c1");
  ASSERT_TRUE(RunUntil([&] { return heard_.size() == 1; }, kDeadline));
  EXPECT_EQ(heard_[0], "c1");
  EXPECT_EQ(payloads_[0], "x") << "the handler gets the message's payload";

  // The idle timer starts in Unsubscribe from the loop's cached time: bring that up to date
  // first, and take our time point before, so the close comes no sooner than idle_close_ms
  // after it (less the loop clock's millisecond rounding).
  uv_update_time(&loop_);
  const auto unsubscribed = SteadyClock::now();
  subscriber_->Unsubscribe("c1");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c1") == 0; }, kDeadline));
  // Kept open for a while: closed only once idle for idle_close_ms.
  ASSERT_TRUE(RunUntil([&] { return OtherClients(cluster_.port(0)) == 0; }, kDeadline));
  EXPECT_GE(MsSince(unsubscribed), kIdleCloseMs - 50) << "closed before idle_close_ms";

  // Wanted again: a new connection.
  subscriber_->Subscribe("c2");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c2") == 1; }, kDeadline));
}

TEST_F(SubscriberTest, SubscribesEveryChannelAgainAfterTheMasterRestarts) {
  Make();
  subscriber_->Subscribe("c1");
  subscriber_->Subscribe("c2");
  subscriber_->Subscribe("c3");
  subscriber_->Unsubscribe("c3");
  ASSERT_TRUE(
      RunUntil([&] { return cluster_.NumSub(0, "c1") == 1 && cluster_.NumSub(0, "c2") == 1; },
               kDeadline));
  cluster_.Restart(0);
  ASSERT_TRUE(
      RunUntil([&] { return cluster_.NumSub(0, "c1") == 1 && cluster_.NumSub(0, "c2") == 1; },
               kDeadline));
  EXPECT_EQ(cluster_.NumSub(0, "c3"), 0);
  Publish("c2");
  ASSERT_TRUE(RunUntil([&] { return !heard_.empty(); }, kDeadline));
  EXPECT_EQ(heard_, std::vector<std::string>{"c2"});
}

TEST_F(SubscriberTest, StopClosesTheConnectionAndLeavesTheLoopDry) {
  Make();
  subscriber_->Subscribe("c1");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c1") == 1; }, kDeadline));
  subscriber_->Stop();
  subscriber_->Subscribe("c2");  // ignored once stopped
  EXPECT_TRUE(RunUntil([&] { return uv_loop_alive(&loop_) == 0; }, kDeadline));
  EXPECT_TRUE(RunUntil([&] { return OtherClients(cluster_.port(0)) == 0; }, kDeadline));
}

TEST_F(SubscriberTest, ReleaseWatchesAreCountedSoOneUsersUnwatchKeepsAnothersWatch) {
  std::vector<std::string> released;
  ReleaseSubscribers watch(&loop_, {MasterAddress{"127.0.0.1", cluster_.port(0), "", "", {}}},
                           SubscriberOptions{500, 200, 30'000},
                           [&](const std::string& key) { released.push_back(key); });
  const std::string channel = scripts::ReleaseChannel("lock:k");
  watch.Unwatch("lock:k");  // not watched: ignored, and not owed by a later Watch
  watch.Watch("lock:k");    // e.g. the engine's waiter
  watch.Watch("lock:k");    // e.g. an election observer
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, channel) == 1; }, kDeadline));

  watch.Unwatch("lock:k");  // one user is done; the other still listens
  // A marker key watched and unwatched after it: its UNSUBSCRIBE goes out on the same
  // connection after any the Unwatch above sent, so once the master has dropped the marker it
  // has seen whatever came before.
  const std::string marker = scripts::ReleaseChannel("lock:marker");
  watch.Watch("lock:marker");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, marker) == 1; }, kDeadline));
  watch.Unwatch("lock:marker");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, marker) == 0; }, kDeadline));
  EXPECT_EQ(cluster_.NumSub(0, channel), 1) << "one Unwatch of two ended the watch";
  Publish(channel);
  ASSERT_TRUE(RunUntil([&] { return !released.empty(); }, kDeadline));
  EXPECT_EQ(released, std::vector<std::string>{"lock:k"});

  watch.Unwatch("lock:k");  // the last user: the watch ends
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, channel) == 0; }, kDeadline));
  watch.Stop();
  EXPECT_TRUE(RunUntil([&] { return uv_loop_alive(&loop_) == 0; }, kDeadline));
}

}  // namespace
}  // namespace lw::test::subscriber
