// The fleet revoke of an election's leader whose agent is gone, against real masters: the
// compare-and-delete fallback (fleet/revoke.h) removes the leader's hold at P R and its record
// at P R US "leader" together, as the engine's release does, and leaves a record that names
// another value alone.

#include <gtest/gtest.h>
#include <signal.h>

#include "core/election_record.h"
#include "core/lock_kind.h"
#include "fleet/records.h"
#include "fleet/revoke.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::fleet_revoke_election {
namespace {

using nlohmann::json;

// Only ends a failing test: everything awaited here happens far sooner on a working agent.
constexpr milliseconds kAwait{30'000};

fleet::RevokeRequest RevokeOf(const RedisCluster& cluster, const std::string& resource) {
  fleet::RevokeRequest req;
  for (int i = 0; i < cluster.size(); ++i)
    req.masters.push_back({"127.0.0.1", cluster.port(i), "", "", {}});
  req.key_prefix = "lock:";
  req.resource = resource;
  req.by = "test";
  return req;
}

TEST(FleetRevokeElectionTest, ALeaderWhoseAgentIsGoneLosesItsHoldAndItsRecordOnEveryMaster) {
  RedisCluster cluster(3);
  AgentProcess agent(cluster);
  auto leader = agent.Connect();
  const json led = leader.Campaign("jobs", "host-a", 60'000, 0);
  ASSERT_TRUE(led.value("ok", false)) << led;
  const std::string record = LeaderKey("lock:", "jobs");
  ASSERT_TRUE(Eventually([&] { return cluster.CountWithKey(record) == 3; }, kAwait))
      << "the leader's record is written on every master";
  const std::string id =
      fleet::AgentOfValue(cluster.Get(0, KeyOf("jobs")).value_or("")).value_or("");
  ASSERT_FALSE(id.empty());

  // The leader's agent dies and nobody listens on its revoke channel any more: the revoke
  // falls back to removing the hold itself.
  agent.Signal(SIGKILL);
  ASSERT_EQ(agent.WaitExit(kAwait), 128 + SIGKILL);
  ASSERT_TRUE(Eventually(
      [&] {
        for (int i = 0; i < cluster.size(); ++i) {
          if (cluster.NumSub(i, fleet::RevokeChannel(id)) != 0) return false;
        }
        return true;
      },
      kAwait));

  const fleet::RevokeResult r = fleet::RevokeInFleet(RevokeOf(cluster, "jobs"));
  EXPECT_EQ(r.how, fleet::RevokeResult::How::kDeleted) << fleet::HowName(r.how) << " " << r.error;
  EXPECT_EQ(r.agent_id, id);
  EXPECT_EQ(r.mode, HoldMode::kExclusive);
  EXPECT_EQ(r.deleted, 3);
  EXPECT_EQ(cluster.CountWithKey(KeyOf("jobs")), 0);
  EXPECT_EQ(cluster.CountWithKey(record), 0) << "the revoked leader's record outlived its hold";
}

TEST(FleetRevokeElectionTest, ARecordNamingAnotherValueIsLeftAlone) {
  RedisCluster cluster(3);
  const std::string gone = fleet::LockValue(fleet::NewAgentId(), "t1");
  const std::string next = fleet::LockValue(fleet::NewAgentId(), "t2");
  const std::string record = LeaderKey("lock:", "jobs");
  for (int i = 0; i < 3; ++i) cluster.Set(i, KeyOf("jobs"), gone, 60'000);
  cluster.Set(0, record, StoredRecord(gone, {7, 1, "{}"}), 60'000);
  cluster.Set(1, record, StoredRecord(next, {8, 2, "{}"}), 60'000);
  cluster.Set(2, record, gone + "-not-a-record-of-it", 60'000);

  const fleet::RevokeResult r = fleet::RevokeInFleet(RevokeOf(cluster, "jobs"));
  EXPECT_EQ(r.how, fleet::RevokeResult::How::kDeleted) << fleet::HowName(r.how) << " " << r.error;
  EXPECT_EQ(r.deleted, 3);
  EXPECT_EQ(cluster.CountWithKey(KeyOf("jobs")), 0);
  EXPECT_FALSE(cluster.Get(0, record).has_value());
  EXPECT_EQ(cluster.Get(1, record), StoredRecord(next, {8, 2, "{}"}));
  EXPECT_EQ(cluster.Get(2, record), gone + "-not-a-record-of-it");
}

}  // namespace
}  // namespace lw::test::fleet_revoke_election
