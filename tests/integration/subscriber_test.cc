// redis/subscriber on its own libuv loop against a real redis-server: lazy connect, messages,
// idle close, re-subscribe after a restart, and a clean Stop.

#include "redis/subscriber.h"

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

namespace lw::test {
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

class SubscriberTest : public ::testing::Test {
 protected:
  SubscriberTest() { uv_loop_init(&loop_); }
  ~SubscriberTest() override {
    subscriber_.reset();
    // Every handle closes: nothing keeps the loop alive or leaks.
    EXPECT_TRUE(RunUntil([&] { return uv_loop_alive(&loop_) == 0; }, milliseconds(1000)));
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  void Make(int64_t idle_close_ms = 30'000) {
    MasterAddress address{"127.0.0.1", cluster_.port(0), "", ""};
    subscriber_ = std::make_unique<Subscriber>(
        &loop_, address, SubscriberOptions{500, 200, idle_close_ms},
        [this](const std::string& channel) { heard_.push_back(channel); });
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
};

TEST_F(SubscriberTest, ConnectsOnlyWhileAChannelIsWantedAndClosesWhenIdle) {
  Make(/*idle_close_ms=*/300);
  EXPECT_FALSE(RunUntil([&] { return OtherClients(cluster_.port(0)) != 0; }, milliseconds(200)))
      << "no channel, no connection";
  subscriber_->Subscribe("c1");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c1") == 1; }, milliseconds(2000)));
  Publish("c1");
  ASSERT_TRUE(RunUntil([&] { return heard_.size() == 1; }, milliseconds(2000)));
  EXPECT_EQ(heard_[0], "c1");

  subscriber_->Unsubscribe("c1");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c1") == 0; }, milliseconds(2000)));
  EXPECT_EQ(OtherClients(cluster_.port(0)), 1) << "kept open for a while";
  const auto unsubscribed = SteadyClock::now();
  ASSERT_TRUE(RunUntil([&] { return OtherClients(cluster_.port(0)) == 0; }, milliseconds(2000)));
  EXPECT_GE(MsSince(unsubscribed), 250);

  // Wanted again: a new connection.
  subscriber_->Subscribe("c2");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c2") == 1; }, milliseconds(2000)));
}

TEST_F(SubscriberTest, SubscribesEveryChannelAgainAfterTheMasterRestarts) {
  Make();
  subscriber_->Subscribe("c1");
  subscriber_->Subscribe("c2");
  subscriber_->Subscribe("c3");
  subscriber_->Unsubscribe("c3");
  ASSERT_TRUE(
      RunUntil([&] { return cluster_.NumSub(0, "c1") == 1 && cluster_.NumSub(0, "c2") == 1; },
               milliseconds(2000)));
  cluster_.Restart(0);
  ASSERT_TRUE(
      RunUntil([&] { return cluster_.NumSub(0, "c1") == 1 && cluster_.NumSub(0, "c2") == 1; },
               milliseconds(3000)));
  EXPECT_EQ(cluster_.NumSub(0, "c3"), 0);
  Publish("c2");
  ASSERT_TRUE(RunUntil([&] { return !heard_.empty(); }, milliseconds(2000)));
  EXPECT_EQ(heard_, std::vector<std::string>{"c2"});
}

TEST_F(SubscriberTest, StopClosesTheConnectionAndLeavesTheLoopDry) {
  Make();
  subscriber_->Subscribe("c1");
  ASSERT_TRUE(RunUntil([&] { return cluster_.NumSub(0, "c1") == 1; }, milliseconds(2000)));
  subscriber_->Stop();
  subscriber_->Subscribe("c2");  // ignored once stopped
  EXPECT_TRUE(RunUntil([&] { return uv_loop_alive(&loop_) == 0; }, milliseconds(1000)));
  EXPECT_TRUE(RunUntil([&] { return OtherClients(cluster_.port(0)) == 0; }, milliseconds(2000)));
}

}  // namespace
}  // namespace lw::test
