// LockEngine as the fleet reads it: the value a key holds names the agent (value_prefix), the
// waiters listed longest-waiting first, the bounded view of the longest-held locks, and the
// revoke of a grant by the value read from the masters.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

constexpr char kPrefix[] = "0123456789abcdef:";

EngineOptions WithValuePrefix() {
  EngineOptions o = Options();
  o.value_prefix = kPrefix;
  return o;
}

struct RevokeRecord {
  int calls = 0;
  std::optional<LockEngine::Revocation> result;
};

class LockEngineGrantsTest : public LockEngineTest {
 protected:
  RevokeRecord* RevokeGrant(const std::string& key, const std::string& value) {
    RevokeRecord* rec = &revokes_.emplace_back();
    engine_->RevokeGrant(key, value, [rec](const std::optional<LockEngine::Revocation>& r) {
      ++rec->calls;
      rec->result = r;
    });
    return rec;
  }
  std::deque<RevokeRecord> revokes_;
};

TEST_F(LockEngineGrantsTest, EveryValueOnTheMastersIsThePrefixedTokenAndClientsSeeTheToken) {
  MakeEngine(WithValuePrefix());
  const std::string token = Hold(1, "res");
  ASSERT_TRUE(IsHexToken(token)) << "the client's token stays the bare token: " << token;
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Holder(Key("res")), kPrefix + token) << "node " << n->index();
  }
  EXPECT_EQ(engine_->books().HeldGrants(),
            (std::vector<std::pair<std::string, std::string>>{{Key("res"), kPrefix + token}}));
  AcquireRecord* renewed = Acquire(2, "other", 10'000, 0);
  ASSERT_TRUE(RunUntil([renewed] { return renewed->calls > 0; }));
  Extend(1, "res", token, 20'000);
  Release(2, "other", renewed->grant().token);
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) {
    for (const auto& c : n->log()) {
      EXPECT_THAT(c.token, ::testing::StartsWith(kPrefix)) << "node " << n->index();
    }
  }
  EXPECT_EQ(node(0).Count(Op::kExtend), 1u);
  EXPECT_EQ(node(0).Count(Op::kDelete), 1u);
}

TEST_F(LockEngineGrantsTest, AllWaitersListsLongestWaitingFirstWithoutCancelledOnes) {
  MakeEngine();
  Hold(1, "a");
  Hold(1, "b");
  EXPECT_TRUE(engine_->books().AllWaiters(10).empty());
  Acquire(2, "a", 10'000, 5'000);
  RunFor(5);
  Acquire(3, "b", 7'000, 6'000);
  RunFor(5);
  Acquire(4, "a", 10'000, 4'000);
  RunFor(5);

  std::vector<WaiterView> all = engine_->books().AllWaiters(10);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].session, 2u);
  EXPECT_EQ(all[0].resource, "a");
  EXPECT_EQ(all[0].wait_ms, 5'000);
  EXPECT_EQ(all[1].session, 3u);
  EXPECT_EQ(all[1].resource, "b");
  EXPECT_EQ(all[1].wait_ms, 6'000);
  EXPECT_EQ(all[2].session, 4u);
  EXPECT_GE(all[0].waited_ms, all[1].waited_ms);
  EXPECT_GE(all[1].waited_ms, all[2].waited_ms);
  EXPECT_GE(all[0].waited_ms, 10) << "two loop pauses of 5 ms at least";
  EXPECT_EQ(all[0].peer.pid, -1) << "peers are the agent's to fill";

  const std::vector<WaiterView> first = engine_->books().AllWaiters(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].session, 2u) << "the bound keeps the longest waiting";

  engine_->CloseSession(2);
  all = engine_->books().AllWaiters(10);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].session, 3u);
  EXPECT_EQ(all[1].session, 4u);
}

TEST_F(LockEngineGrantsTest, ListedLocksKeepsTheLongestHeldInTheOrderOfAllLocks) {
  MakeEngine();
  for (int i = 0; i < 6; ++i) {
    Hold(1, "r" + std::to_string(i));
    RunFor(3);  // acquisition times apart
  }
  const std::vector<LockView> two = engine_->books().ListedLocks(2, std::chrono::steady_clock::now());
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].resource, "r0");
  EXPECT_EQ(two[1].resource, "r1");
  EXPECT_EQ(two[0].key, Key("r0"));
  EXPECT_GE(two[0].held_ms, two[1].held_ms);

  std::vector<std::string> all, oldest;
  for (const LockView& l : engine_->books().AllLocks()) all.push_back(l.resource);
  for (const LockView& l : engine_->books().ListedLocks(100, std::chrono::steady_clock::now())) oldest.push_back(l.resource);
  EXPECT_EQ(oldest, all) << "a bound above the count lists every lock, as AllLocks does";
  EXPECT_EQ(all, (std::vector<std::string>{"r0", "r1", "r2", "r3", "r4", "r5"}));
  EXPECT_TRUE(engine_->books().ListedLocks(0, std::chrono::steady_clock::now()).empty());
}

TEST_F(LockEngineGrantsTest, RevokeGrantWithTheHoldersValueRevokesAndTheNextWaiterGoes) {
  MakeEngine(WithValuePrefix());
  const std::string token = Hold(1, "res");
  AcquireRecord* next = Acquire(2, "res", 10'000, 5'000);
  RevokeRecord* rec = RevokeGrant(Key("res"), kPrefix + token);
  ASSERT_TRUE(RunUntil([&] { return rec->calls > 0 && next->calls > 0; }));
  ASSERT_TRUE(rec->result.has_value());
  EXPECT_EQ(rec->result->session, 1u);
  EXPECT_EQ(rec->result->deleted, kNodes);
  ExpectDeletedEverywhere(Key("res"), kPrefix + token);
  ASSERT_EQ(lost_.size(), 1u);
  EXPECT_EQ(lost_[0].session, 1u);
  EXPECT_EQ(lost_[0].token, token);
  EXPECT_EQ(lost_[0].reason, "revoked");
  EXPECT_EQ(stats_.locks_lost[LossReason::kRevoked].Value(), 1);
  ASSERT_TRUE(next->granted()) << next->Describe();
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
}

TEST_F(LockEngineGrantsTest, RevokeGrantWithAnotherValueOrKeyDoesNothing) {
  MakeEngine(WithValuePrefix());
  const std::string token = Hold(1, "res");
  const size_t commands = TotalCommands();
  RevokeRecord* bare = RevokeGrant(Key("res"), token);  // the token without the agent's prefix
  RevokeRecord* other = RevokeGrant(Key("res"), std::string(kPrefix) + std::string(40, 'f'));
  RevokeRecord* unheld = RevokeGrant(Key("nothing"), kPrefix + token);
  RevokeRecord* foreign = RevokeGrant("elsewhere:res", kPrefix + token);
  ASSERT_TRUE(RunUntil([&] { return foreign->calls > 0; }));
  RunFor(20);
  for (RevokeRecord* r : {bare, other, unheld, foreign}) {
    EXPECT_EQ(r->calls, 1);
    EXPECT_FALSE(r->result.has_value());
  }
  EXPECT_EQ(TotalCommands(), commands) << "nothing was sent to the masters";
  EXPECT_TRUE(lost_.empty());
  ASSERT_EQ(engine_->books().HeldBy(1).size(), 1u);
  EXPECT_EQ(engine_->books().HeldBy(1)[0].token, token);

  // The second copy of an order (one per master) finds the grant gone.
  RevokeRecord* first = RevokeGrant(Key("res"), kPrefix + token);
  RevokeRecord* again = RevokeGrant(Key("res"), kPrefix + token);
  ASSERT_TRUE(RunUntil([&] { return first->calls > 0 && again->calls > 0; }));
  EXPECT_TRUE(first->result.has_value());
  EXPECT_FALSE(again->result.has_value());
  EXPECT_EQ(lost_.size(), 1u);
}

}  // namespace
}  // namespace lw::engine_test
