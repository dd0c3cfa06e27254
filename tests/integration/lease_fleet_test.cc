// Detached leases through any agent of the fleet, with real masters and real agents: a lease
// created through agent A is extended through agent B (whose value the key then holds) and
// released through A again, which grants A's waiter at once; a lease whose agent was killed is
// released through another; a stop leaves it for any agent to end.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "client/client.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::lease_fleet {
namespace {

using lw::client::Client;
using nlohmann::json;

std::string IdOf(const AgentProcess& agent) {
  std::string id = ReadFile(agent.socket_path() + ".id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

json Detach(Client& c, const std::string& resource, int64_t ttl_ms) {
  return c.Call({{"op", "acquire"}, {"resource", resource}, {"ttl_ms", ttl_ms}, {"wait_ms", 0},
                 {"detach", true}});
}

// The `locks` entry of `resource` through c, or null.
json LockEntry(Client& c, const std::string& resource) {
  const json reply = c.Call({{"op", "locks"}});
  for (const json& l : reply.at("locks")) {
    if (l.value("resource", "") == resource) return l;
  }
  return nullptr;
}

class LeaseFleetTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{3};
};

TEST_F(LeaseFleetTest, ExtendedThroughAnotherAgentAndReleasedThroughItsOwn) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_);
  std::string token;
  {
    Client creator = a.Connect();  // closed at the end of the block: the lease outlives it
    const json lease = Detach(creator, "jobs/x", 20'000);
    ASSERT_TRUE(lease.value("ok", false)) << lease;
    token = lease["token"];
  }
  ASSERT_EQ(cluster_.AwaitHolding(KeyOf("jobs/x"), IdOf(a) + ":" + token, 3), 3);

  Client waiter = a.Connect();  // waits behind the lease, through the same agent
  waiter.SendRaw(R"({"id":7,"op":"acquire","resource":"jobs/x","ttl_ms":5000,"wait_ms":30000})"
                 "\n");

  Client through_b = b.Connect();
  const json extended = through_b.Extend("jobs/x", token, 40'000);
  ASSERT_TRUE(extended.value("ok", false)) << extended << b.Log();
  EXPECT_GT(extended["validity_ms"].get<int64_t>(), 30'000);
  EXPECT_EQ(cluster_.AwaitHolding(KeyOf("jobs/x"), IdOf(b) + ":" + token, 3), 3)
      << "the key holds the value of the agent that extended it last";
  const json shown = LockEntry(through_b, "jobs/x");
  ASSERT_FALSE(shown.is_null()) << "B lists the lease it took over";
  EXPECT_EQ(shown.value("detached", false), true) << shown;
  EXPECT_FALSE(waiter.ReadLine(milliseconds(300)).has_value()) << "the lease still excludes it";

  Client through_a = a.Connect();
  const json released = through_a.Release("jobs/x", token);
  ASSERT_TRUE(released.value("ok", false)) << released;
  const auto granted = waiter.ReadLine(milliseconds(10'000));
  ASSERT_TRUE(granted.has_value()) << "A's waiter is granted once the lease is gone\n" << a.Log();
  const json grant = json::parse(*granted);
  ASSERT_TRUE(grant.value("ok", false)) << grant;
  EXPECT_EQ(cluster_.AwaitHolding(KeyOf("jobs/x"),
                                  IdOf(a) + ":" + grant["token"].get<std::string>(), 3),
            3);
  EXPECT_EQ(through_b.Extend("jobs/x", token, 10'000).value("error", ""), "not_held")
      << "a released lease is not taken over again";
}

TEST_F(LeaseFleetTest, ALeaseOfAKilledAgentIsReleasedThroughAnother) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_);
  std::string token;
  {
    Client creator = a.Connect();
    const json lease = Detach(creator, "jobs/y", 60'000);
    ASSERT_TRUE(lease.value("ok", false)) << lease;
    token = lease["token"];
  }
  a.Signal(SIGKILL);
  a.WaitExit(milliseconds(10'000));
  ASSERT_EQ(cluster_.AwaitHoldingGrant(KeyOf("jobs/y"), token, 3), 3) << "left on the masters";

  Client c = b.Connect();
  EXPECT_EQ(c.Acquire("jobs/y", 5'000, 0).value("error", ""), "timeout") << "still excludes";
  EXPECT_EQ(c.Release("jobs/y", std::string(40, 'a')).value("error", ""), "not_held")
      << "another token takes nothing over";
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("jobs/y"), token, 3), 3);
  const json released = c.Release("jobs/y", token);
  ASSERT_TRUE(released.value("ok", false)) << released << b.Log();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("jobs/y")), 0);
  EXPECT_TRUE(c.Acquire("jobs/y", 5'000, 0).value("ok", false));
}

}  // namespace
}  // namespace lw::test::lease_fleet
