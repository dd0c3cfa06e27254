// The quorum's state in one word (core/quorum_state.h): the rule every front shows.

#include "core/quorum_state.h"

#include <gtest/gtest.h>

namespace lw {
namespace {

QuorumCounts FiveMasters(int up, int usable) { return {5, up, usable, 3}; }

TEST(QuorumStateTest, HealthyOnlyWhileEveryMasterIsUsable) {
  EXPECT_EQ(QuorumStateOf(FiveMasters(5, 5)), QuorumState::kHealthy);
  EXPECT_EQ(QuorumMargin(FiveMasters(5, 5)), 2);
}

TEST(QuorumStateTest, AtRiskWithAMasterDownOrQuarantinedButAQuorumUsable) {
  EXPECT_EQ(QuorumStateOf(FiveMasters(4, 4)), QuorumState::kAtRisk);  // margin 1, not whole
  EXPECT_EQ(QuorumMargin(FiveMasters(4, 4)), 1);
  EXPECT_EQ(QuorumStateOf(FiveMasters(3, 3)), QuorumState::kAtRisk);
  EXPECT_EQ(QuorumStateOf(FiveMasters(5, 3)), QuorumState::kAtRisk);  // 2 in restart quarantine
  EXPECT_TRUE(QuorumReady(FiveMasters(5, 3)));
}

TEST(QuorumStateTest, LostBelowAQuorumOfUsableMastersOrBeforeTheQuorumIsKnown) {
  EXPECT_EQ(QuorumStateOf(FiveMasters(2, 2)), QuorumState::kLost);
  EXPECT_EQ(QuorumMargin(FiveMasters(2, 2)), -1);
  EXPECT_EQ(QuorumStateOf(FiveMasters(5, 2)), QuorumState::kLost);  // up, but quarantined
  EXPECT_FALSE(QuorumReady(FiveMasters(5, 2)));
  EXPECT_EQ(QuorumStateOf(QuorumCounts{}), QuorumState::kLost);
}

TEST(QuorumStateTest, OneWordPerState) {
  EXPECT_EQ(QuorumStateName(QuorumState::kHealthy), "healthy");
  EXPECT_EQ(QuorumStateName(QuorumState::kAtRisk), "at_risk");
  EXPECT_EQ(QuorumStateName(QuorumState::kLost), "lost");
}

TEST(QuorumStateTest, DescribesTheCountsThatDecide) {
  EXPECT_EQ(DescribeQuorum(FiveMasters(4, 4)), "4 of 5 masters up, 4 usable, quorum 3");
  EXPECT_EQ(DescribeQuorum(FiveMasters(5, 3)),
            "5 of 5 masters up (2 in restart quarantine), 3 usable, quorum 3");
}

}  // namespace
}  // namespace lw
