// LockEngine and detached leases named by token across the fleet (docs/safety.md §9): an extend
// or release takes the key over from whichever agent's value it holds for the token; a lease is
// never handed on locally; a lease that ended through another agent blocks no local waiter, and
// the grant that proves it ended drops it from the books.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

const SessionId kLease = LeaseSessionOf(7);

class LeaseEngineTest : public LockEngineTest {
 protected:
  // A detached lease on `resource` granted to kLease through session 1: its token.
  std::string Lease(const std::string& resource, int64_t ttl_ms = 10'000) {
    AcquireRecord* rec = Acquire(1, resource, ttl_ms, 0, false, false,
                                 AcquireKind{.shape = LockShape{}, .shared = false,
                                             .hold_as = kLease, .payload = {}});
    EXPECT_TRUE(RunUntil([rec] { return rec->calls > 0; }));
    EXPECT_TRUE(rec->granted()) << rec->Describe();
    return rec->granted() ? rec->grant().token : std::string();
  }
  // Another agent took the lease over: every master's key holds its value for the token.
  void MovedAway(const std::string& resource, const std::string& token) {
    for (const auto& n : nodes_) n->Put(Key(resource), "0123456789abcdef:" + token, 10'000);
  }
};

TEST_F(LeaseEngineTest, AnExtendTakesTheKeyBackFromAnotherAgentsValueForTheSameToken) {
  MakeEngine();
  const std::string token = Lease("job");
  MovedAway("job", token);
  ExtendRecord* e = Extend(kLease, "job", token, 20'000);
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }));
  ASSERT_TRUE(e->result && std::holds_alternative<Extension>(*e->result));
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Holder(Key("job")), token) << n->index();
    EXPECT_EQ(n->Count(scripts::KindScript::kTakeLease), 1u) << n->index();
  }

  // Another token's value is never taken.
  for (const auto& n : nodes_) n->Put(Key("job"), "0123456789abcdef:" + std::string(40, 'e'), 10'000);
  ExtendRecord* other = Extend(kLease, "job", token, 20'000);
  ASSERT_TRUE(RunUntil([other] { return other->calls > 0; }));
  ASSERT_TRUE(other->result && std::holds_alternative<Failure>(*other->result));
  EXPECT_EQ(std::get<Failure>(*other->result).code, ErrorCode::kNotHeld);
  EXPECT_EQ(node(0).Holder(Key("job")), "0123456789abcdef:" + std::string(40, 'e'));
}

TEST_F(LeaseEngineTest, AReleaseTakesTheKeyBackFirstSoItEndsTheLeaseWhereverItIs) {
  MakeEngine();
  const std::string token = Lease("job");
  MovedAway("job", token);
  ReleaseRecord* r = Release(kLease, "job", token);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) EXPECT_FALSE(n->Holder(Key("job")).has_value()) << n->index();
}

TEST_F(LeaseEngineTest, ALeaseIsNeitherHandedOnNorHandedALockLocally) {
  MakeEngine();
  const std::string token = Lease("job", 1'000);
  AcquireRecord* next = Acquire(2, "job", 1'000, 5'000);
  RunFor(50);
  EXPECT_EQ(next->calls, 0);
  Release(kLease, "job", token);
  ASSERT_TRUE(RunUntil([next] { return next->calls > 0; }));
  ASSERT_TRUE(next->granted()) << next->Describe();
  EXPECT_NE(node(0).Holder(Key("job")), token) << "the waiter took a fresh key, not the lease's";

  // A detached acquire waiting behind an ordinary holder is not handed its key either.
  AcquireRecord* detached = Acquire(3, "job", 1'000, 5'000, false, false,
                                    AcquireKind{.shape = LockShape{}, .shared = false,
                                                .hold_as = kLease, .payload = {}});
  Release(2, "job", next->grant().token);
  ASSERT_TRUE(RunUntil([detached] { return detached->calls > 0; }));
  ASSERT_TRUE(detached->granted()) << detached->Describe();
  EXPECT_EQ(node(0).Holder(Key("job")), detached->grant().token);
  EXPECT_EQ(stats_.local_handoffs.Value(), 0);
}

TEST_F(LeaseEngineTest, AWaiterBehindALeaseThatEndedElsewhereIsGrantedAndTheLeaseDropped) {
  MakeEngine();
  const std::string token = Lease("job", 60'000);
  for (const auto& n : nodes_) n->Erase(Key("job"));  // released through another agent
  AcquireRecord* next = Acquire(2, "job", 1'000, 5'000);
  ASSERT_TRUE(RunUntil([next] { return next->calls > 0; }));
  ASSERT_TRUE(next->granted()) << next->Describe();
  EXPECT_TRUE(engine_->books().HeldBy(kLease).empty());
  ASSERT_EQ(lost_.size(), 1u);
  EXPECT_EQ(lost_[0].session, kLease);
  EXPECT_EQ(lost_[0].token, token);
  EXPECT_EQ(lost_[0].reason, "ended_elsewhere");
}

TEST_F(LeaseEngineTest, AWaiterBehindALiveLeaseIsRefusedByTheMastersAndTheLeaseStays) {
  MakeEngine();
  const std::string token = Lease("job", 60'000);
  AcquireRecord* next = Acquire(2, "job", 1'000, 300);
  ASSERT_TRUE(RunUntil([next] { return next->calls > 0; }));
  EXPECT_TRUE(next->failed(ErrorCode::kTimeout)) << next->Describe();
  EXPECT_GE(node(0).Count(Op::kSet) + node(0).Count(Op::kKindScript), 2u) << "it asked the masters";
  EXPECT_EQ(engine_->books().HeldBy(kLease).size(), 1u);
  EXPECT_TRUE(lost_.empty());
  EXPECT_EQ(node(0).Holder(Key("job")), token);
}

}  // namespace
}  // namespace lw::engine_test
