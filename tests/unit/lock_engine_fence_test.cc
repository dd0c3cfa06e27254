// LockEngine: fenced acquires (the two phases, the fence quorum, data loss).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

// ---- fencing and restart quarantine ------------------------------------------------------------

using ::testing::HasSubstr;

TEST_F(LockEngineTest, FencedGrantsGetIncreasingFencesWrittenWhereTheKeyIsHeld) {
  MakeEngine();
  std::string token;
  const auto first = FencedGrant(1, "res", &token);
  ASSERT_EQ(first, 1);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Count(Op::kSetReadFence), 1u);
    EXPECT_EQ(n->Count(Op::kSet), 0u) << "a fenced acquire sets the key in the fence script";
    EXPECT_EQ(n->Counter("fence:res"), 1) << "node " << n->index();
    // Phase 2 went out after phase 1 on the same connection, with the grant's token.
    EXPECT_LT(IndexOf(*n, Op::kSetReadFence, token), IndexOf(*n, Op::kRaiseFence, token));
  }
  Release(1, "res", token);
  EXPECT_EQ(FencedGrant(2, "res"), 2);
  AcquireRecord* plain = Acquire(3, "other", 1000, 0);
  ASSERT_TRUE(RunUntil([plain] { return plain->calls > 0; }));
  ASSERT_TRUE(plain->granted());
  EXPECT_FALSE(plain->grant().fence.has_value()) << "only asked-for fences are issued";
}

TEST_F(LockEngineTest, FenceIsOneAboveTheHighestCounterOfTheMastersThatGranted) {
  MakeEngine();
  const int64_t counters[] = {3, 10, 7, 0, 99};
  for (int i = 0; i < kNodes; ++i) nodes_[i]->SetCounter("fence:res", counters[i]);
  nodes_[4]->Hold();  // its 99 is never read: 4 of 5 answer
  EXPECT_EQ(FencedGrant(1, "res"), 11);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(nodes_[i]->Counter("fence:res"), 11) << i;
  EXPECT_EQ(nodes_[4]->Counter("fence:res"), 99);
}

TEST_F(LockEngineTest, FencedAcquireNeedsTheFenceQuorumWherePlainLocksNeedAMajority) {
  MakeEngine();
  ASSERT_EQ(engine_->fence_quorum(), 4);
  nodes_[3]->Fail();
  nodes_[4]->Fail();
  AcquireRecord* plain = Acquire(1, "plain", 1000, 0);
  AcquireRecord* fenced = Acquire(2, "fenced", 1000, 0, false, /*fence=*/true);
  ASSERT_TRUE(RunUntil([&] { return plain->calls > 0 && fenced->calls > 0; }));
  EXPECT_TRUE(plain->granted()) << plain->Describe();
  ASSERT_TRUE(fenced->failed(ErrorCode::kNoQuorum)) << fenced->Describe();
  EXPECT_THAT(fenced->failure().message, HasSubstr("a fenced grant needs 4 of 5"));
  ASSERT_TRUE(RunUntilQuiet());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(nodes_[i]->Holder(Key("fenced")), std::nullopt) << "undone on node " << i;
  }
}

// Why the fence quorum is 4 of 5 and not 3: two masters restart without their data right after
// a grant that only 4 masters confirmed. A read from any 4 still includes a survivor.
TEST_F(LockEngineTest, FencesKeepIncreasingWhenTwoMastersLoseTheirData) {
  MakeEngine();
  for (int i = 0; i < kNodes; ++i) nodes_[i]->SetCounter("fence:res", 40);
  nodes_[4]->Fail();  // down: never sees the grant
  std::string token;
  ASSERT_EQ(FencedGrant(1, "res", &token), 41);  // written on 0..3 only
  Release(1, "res", token);
  ASSERT_TRUE(RunUntil([&] { return !nodes_[0]->Holder(Key("res")); }));
  nodes_[0]->Forget();
  nodes_[1]->Forget();
  nodes_[2]->Fail();  // the next grant hears 0, 1 (forgot), 3 (has 41) and 4 (has 40)
  nodes_[4]->Immediate();
  const auto second = FencedGrant(2, "res");
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(*second, 41);
}

TEST_F(LockEngineTest, WithAFenceQuorumOfAMajorityDataLossCanMakeFencesGoBackwards) {
  EngineOptions options = Options();
  options.fence_quorum = 3;  // what an operator may choose for masters that never lose data
  MakeEngine(options);
  for (int i = 0; i < kNodes; ++i) nodes_[i]->SetCounter("fence:res", 40);
  nodes_[3]->Fail();
  nodes_[4]->Fail();
  std::string token;
  ASSERT_EQ(FencedGrant(1, "res", &token), 41);  // written on 0..2 only
  Release(1, "res", token);
  ASSERT_TRUE(RunUntil([&] { return !nodes_[0]->Holder(Key("res")); }));
  nodes_[0]->Forget();
  nodes_[1]->Forget();
  nodes_[2]->Fail();
  nodes_[3]->Immediate();
  nodes_[4]->Immediate();
  // Documented in docs/safety.md: the only survivor of the grant above does not answer.
  EXPECT_EQ(FencedGrant(2, "res"), 41);
}
TEST_F(LockEngineTest, QuarantinedMastersStillCountTowardTheFenceQuorum) {
  MakeEngine();
  nodes_[0]->Quarantine(true);
  nodes_[1]->Quarantine(true);
  nodes_[2]->Hold();  // counting: 3 and 4 only... not a quorum
  AcquireRecord* a = Acquire(1, "res", 1000, 0, false, /*fence=*/true);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  EXPECT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  nodes_[2]->ReleaseHeld();
  nodes_[2]->Immediate();
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(FencedGrant(2, "res"), 1) << "2, 3, 4 count; 0 and 1 make up the fence quorum";
}

}  // namespace
}  // namespace lw::engine_test
