// agent/detached_leases: lease sessions, the creators' records, who may release or extend a
// detached lease, and the per-uid limit.

#include "agent/detached_leases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace lw {
namespace {

using ::testing::HasSubstr;

DetachedLease LeaseOf(std::string resource, std::string token, uint64_t hold, int uid) {
  DetachedLease lease;
  lease.resource = std::move(resource);
  lease.token = std::move(token);
  lease.hold = hold;
  lease.session = LeaseSessionOf(static_cast<uid_t>(uid));
  lease.creator = Peer{4242, uid, uid, "python3 job.py"};
  return lease;
}

PeerIds IdsOf(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  return PeerIds{uid, gid, std::move(groups)};
}

AccessPolicy LeaseRules(const std::vector<std::string>& rules) {
  auto built = AccessPolicy::Build(rules, NameResolver{});
  if (auto* error = std::get_if<std::string>(&built)) {
    ADD_FAILURE() << *error;
    return {};
  }
  return std::get<AccessPolicy>(std::move(built));
}

TEST(LeaseSessions, NeverAConnectionsAndTheUidReadsBack) {
  for (uid_t uid : {uid_t{0}, uid_t{1000}, uid_t{65534}, static_cast<uid_t>(-2),
                    static_cast<uid_t>(-1)}) {
    const SessionId s = LeaseSessionOf(uid);
    EXPECT_TRUE(IsLeaseSession(s)) << uid;
    EXPECT_EQ(UidOfLeaseSession(s), uid);
  }
  EXPECT_NE(LeaseSessionOf(0), LeaseSessionOf(1));
  // Connection ids count up from 1.
  for (SessionId connection : {SessionId{1}, SessionId{1} << 40, (SessionId{1} << 63) - 1}) {
    EXPECT_FALSE(IsLeaseSession(connection)) << connection;
  }
}

TEST(DetachedLeases, FoundByResourceAndTokenOrByHoldUntilDropped) {
  DetachedLeases leases;
  leases.Add(LeaseOf("jobs/a", "t1", 11, 1000));
  leases.Add(LeaseOf("jobs/a", "t2", 12, 1001));  // another permit or reader of jobs/a
  leases.Add(LeaseOf("jobs/b", "t1", 13, 1000));  // the same token text on another resource
  EXPECT_EQ(leases.size(), 3u);
  ASSERT_NE(leases.Find("jobs/a", "t2"), nullptr);
  EXPECT_EQ(leases.Find("jobs/a", "t2")->hold, 12u);
  EXPECT_EQ(leases.Find("jobs/b", "t1")->hold, 13u);
  EXPECT_EQ(leases.Find("jobs/a", "t3"), nullptr);
  EXPECT_EQ(leases.Find("jobs/c", "t1"), nullptr);
  ASSERT_NE(leases.OfHold(11), nullptr);
  EXPECT_EQ(leases.OfHold(11)->token, "t1");
  EXPECT_EQ(leases.OfHold(11)->creator.pid, 4242);
  EXPECT_EQ(leases.OfHold(99), nullptr);

  leases.Drop("jobs/a", "t1");
  EXPECT_EQ(leases.Find("jobs/a", "t1"), nullptr);
  EXPECT_EQ(leases.OfHold(11), nullptr);
  EXPECT_NE(leases.Find("jobs/b", "t1"), nullptr) << "only that resource's";
  leases.Drop("jobs/a", "t1");  // again: nothing
  leases.Drop("nothing", "t9");
  EXPECT_EQ(leases.size(), 2u);
}

TEST(LeaseRefusal, TheCreatorsUidMayWhateverTheRules) {
  const DetachedLease lease = LeaseOf("jobs/a", "t", 1, 1000);
  EXPECT_FALSE(LeaseRefusal(IdsOf(1000, 5), lease, AccessPolicy{}, "release"));
  EXPECT_FALSE(LeaseRefusal(IdsOf(1000, 5), lease, LeaseRules({"uid:7 other/"}), "extend"))
      << "a rule that no longer lets it lock there does not take the lease from its uid";
}

TEST(LeaseRefusal, AnotherUidIsForbiddenWithoutALeasesRule) {
  const DetachedLease lease = LeaseOf("jobs/a", "t", 1, 1000);
  for (const AccessPolicy& policy :
       {AccessPolicy{}, LeaseRules({"any *"}), LeaseRules({"uid:0 *", "gid:50 jobs/ +leases"})}) {
    const auto refusal = LeaseRefusal(IdsOf(0, 0), lease, policy, "extend");
    ASSERT_TRUE(refusal);
    EXPECT_EQ(refusal->code, ErrorCode::kForbidden);
    EXPECT_THAT(refusal->message, HasSubstr("uid 0 may not extend the detached lease on "
                                            "\"jobs/a\": it was created by uid 1000"));
    EXPECT_THAT(refusal->message, HasSubstr("+leases"));
  }
  const auto unknown = LeaseRefusal(PeerIds{}, lease, AccessPolicy{}, "release");
  ASSERT_TRUE(unknown);
  EXPECT_THAT(unknown->message, HasSubstr("a peer of unknown uid may not release"));
}

TEST(LeaseRefusal, ALeasesRuleAllowsItsPeersOnItsPrefixes) {
  const AccessPolicy policy = LeaseRules({"uid:1000 *", "gid:50 jobs/ +leases"});
  EXPECT_FALSE(LeaseRefusal(IdsOf(7, 50), LeaseOf("jobs/a", "t", 1, 1000), policy, "release"));
  EXPECT_FALSE(LeaseRefusal(IdsOf(7, 7, {50}), LeaseOf("jobs/a", "t", 1, 1000), policy,
                            "release"))
      << "a supplementary group";
  EXPECT_TRUE(LeaseRefusal(IdsOf(7, 50), LeaseOf("other/a", "t", 1, 1000), policy, "release"))
      << "outside its prefixes";
  EXPECT_TRUE(LeaseRefusal(IdsOf(7, 51), LeaseOf("jobs/a", "t", 1, 1000), policy, "release"))
      << "a peer the rule does not match";
}

TEST(LeaseRefusal, AnUnknownCreatorUidIsNobodysButALeasesRules) {
  const DetachedLease lease = LeaseOf("jobs/a", "t", 1, -1);
  EXPECT_TRUE(LeaseRefusal(PeerIds{}, lease, AccessPolicy{}, "release"))
      << "two peers of unknown uid are not the same uid";
  EXPECT_FALSE(LeaseRefusal(IdsOf(0, 0), lease, LeaseRules({"uid:0 * +leases"}), "release"));
}

TEST(LeaseLimitRefusal, HeldAndAwaitedCountTogetherAgainstTheBound) {
  EXPECT_FALSE(LeaseLimitRefusal(1000, 0, 0, 2));
  EXPECT_FALSE(LeaseLimitRefusal(1000, 1, 0, 2));
  EXPECT_FALSE(LeaseLimitRefusal(1000, 0, 1, 2));
  EXPECT_FALSE(LeaseLimitRefusal(1000, 500, 500, 0)) << "0: no bound";
  for (auto [held, awaited] : {std::pair<size_t, size_t>{2, 0}, {1, 1}, {0, 2}, {5, 0}}) {
    const auto refusal = LeaseLimitRefusal(1000, held, awaited, 2);
    ASSERT_TRUE(refusal) << held << " " << awaited;
    EXPECT_EQ(refusal->code, ErrorCode::kTooMany);
    EXPECT_THAT(refusal->message, HasSubstr("uid 1000 holds " + std::to_string(held) +
                                            " detached lease(s) and awaits " +
                                            std::to_string(awaited)));
    EXPECT_THAT(refusal->message, HasSubstr("max_locks_per_session = 2"));
  }
}

TEST(DescribeLease, NamesTheCreator) {
  EXPECT_EQ(DescribeLease(LeaseOf("jobs/a", "t", 1, 1000)),
            "detached lease of uid 1000, created by pid 4242 (python3 job.py)");
  DetachedLease bare = LeaseOf("jobs/a", "t", 1, 5);
  bare.creator.cmdline.clear();
  EXPECT_EQ(DescribeLease(bare), "detached lease of uid 5, created by pid 4242");
}

}  // namespace
}  // namespace lw
