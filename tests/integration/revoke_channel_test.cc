// The agent's side of the fleet revoke, against real masters and a real agent: a lock key's
// value names the agent ("<agent id>:<token>"), the agent listens on its revoke channel on every
// master, and a RevokeOrder published there revokes the grant whose value matches (its client
// gets `lost`, reason "revoked", the key goes from every master); any other value does nothing.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/records.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::revoke_channel {
namespace {

using nlohmann::json;

class RevokeChannelTest : public ::testing::Test {
 protected:
  // The holder agent's id, read from the key's value on master 0 ("" if it is not there).
  std::string AgentOf(const std::string& resource) {
    const auto value = cluster_.Get(0, KeyOf(resource));
    if (!value) return "";
    return fleet::AgentOfValue(*value).value_or("");
  }

  // Publishes on every master; the subscribers each PUBLISH reached.
  std::vector<int64_t> PublishEverywhere(const std::string& channel, const std::string& message) {
    std::vector<int64_t> reached;
    for (int i = 0; i < cluster_.size(); ++i) reached.push_back(cluster_.Publish(i, channel, message));
    return reached;
  }

  std::string Order(const std::string& resource, const std::string& value) {
    return fleet::Encode(fleet::RevokeOrder{KeyOf(resource), value, "operator-agent (10.0.0.9)"});
  }

  RedisCluster cluster_{5};
  AgentProcess agent_{cluster_};
};

TEST_F(RevokeChannelTest, AKeysValueNamesTheAgentAndAnOrderWithItRevokesTheGrant) {
  auto holder = agent_.Connect();
  const json grant = holder.Acquire("held", 60'000, 1'000, /*renew=*/true);
  ASSERT_TRUE(grant.value("ok", false)) << grant;
  const std::string token = grant["token"];
  ASSERT_THAT(token, ::testing::MatchesRegex("[0-9a-f]{40}")) << "clients see the bare token";
  EXPECT_THAT(cluster_.Get(0, KeyOf("held")).value_or(""),
              ::testing::MatchesRegex("[0-9a-f]{16}:" + token));
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("held"), token, 5), 5);
  const std::string id = AgentOf("held");
  ASSERT_EQ(id.size(), 16u);

  auto other = agent_.Connect();
  const json other_grant = other.Acquire("other", 60'000, 1'000);
  ASSERT_TRUE(other_grant.value("ok", false)) << other_grant;
  EXPECT_EQ(AgentOf("other"), id) << "one agent, one id";

  const std::string channel = fleet::RevokeChannel(id);
  ASSERT_TRUE(Eventually(
      [&] {
        for (int i = 0; i < cluster_.size(); ++i) {
          if (cluster_.NumSub(i, channel) != 1) return false;
        }
        return true;
      },
      milliseconds(10'000)))
      << "the agent listens on its revoke channel on every master\n"
      << agent_.Log();

  // A malformed message and an order with another value are ignored. The order for "other",
  // published after them on the same connections, is obeyed after them: once its holder hears
  // `lost`, the two before it were handled.
  EXPECT_THAT(PublishEverywhere(channel, "not a revoke order"), ::testing::Each(1));
  const std::string wrong = fleet::LockValue(id, std::string(40, 'f'));
  EXPECT_THAT(PublishEverywhere(channel, Order("held", wrong)), ::testing::Each(1));
  const std::string bare = token;  // the token without the agent's id: not the key's value
  EXPECT_THAT(PublishEverywhere(channel, Order("held", bare)), ::testing::Each(1));
  const std::string other_value = *cluster_.Get(0, KeyOf("other"));
  EXPECT_THAT(PublishEverywhere(channel, Order("other", other_value)), ::testing::Each(1));
  auto other_lost = other.NextEvent(milliseconds(10'000));
  ASSERT_TRUE(other_lost.has_value()) << agent_.Log();
  EXPECT_EQ((*other_lost)["resource"], "other");
  EXPECT_EQ((*other_lost)["reason"], "revoked");
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("held"), token, 5), 5) << "a mismatching order acted";
  EXPECT_FALSE(holder.NextEvent(milliseconds(0)).has_value());

  // The holder's value: its client is told, the key goes from every master.
  const std::string value = *cluster_.Get(0, KeyOf("held"));
  EXPECT_THAT(PublishEverywhere(channel, Order("held", value)), ::testing::Each(1));
  auto lost = holder.NextEvent(milliseconds(10'000));
  ASSERT_TRUE(lost.has_value()) << agent_.Log();
  EXPECT_EQ((*lost)["event"], "lost");
  EXPECT_EQ((*lost)["resource"], "held");
  EXPECT_EQ((*lost)["reason"], "revoked");
  ASSERT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("held")) == 0; },
                         milliseconds(10'000)));
  EXPECT_EQ(holder.Release("held", token)["error"], "not_held");
  // Heard once per master: logged once, with who asked.
  ASSERT_TRUE(Eventually(
      [&] {
        return agent_.Log().find("lock key \"lock:held\" revoked through the fleet by "
                                 "\"operator-agent (10.0.0.9)\"") != std::string::npos;
      },
      milliseconds(10'000)))
      << agent_.Log();
  const std::string log = agent_.Log();
  const size_t first = log.find("\"lock:held\" revoked through the fleet");
  EXPECT_EQ(log.find("\"lock:held\" revoked through the fleet", first + 1), std::string::npos)
      << log;
  EXPECT_NE(log.find("malformed revoke order"), std::string::npos) << log;
}

}  // namespace
}  // namespace lw::test::revoke_channel
