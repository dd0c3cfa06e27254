// LockEngine and a session's acquire of what it holds itself (docs/protocol.md "Owners and
// reentrancy"): refused at once when it could only wait for itself, queued when another owner
// of the session asks, and, asked reentrant, the same hold one acquire deeper, unwound by as many
// releases with nothing sent to the masters until the last.

#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

AcquireKind Owner(uint64_t owner, bool reentrant = false, bool shared = false) {
  return AcquireKind{.shape = LockShape{}, .shared = shared, .hold_as = 0, .payload = {},
                     .owner = owner, .reentrant = reentrant};
}

class ReentryEngineTest : public LockEngineTest {
 protected:
  AcquireRecord* Granted(SessionId s, const std::string& resource, AcquireKind kind) {
    AcquireRecord* rec = Acquire(s, resource, 10'000, 0, false, false, std::move(kind));
    EXPECT_TRUE(RunUntil([rec] { return rec->calls > 0; }));
    EXPECT_TRUE(rec->granted()) << rec->Describe();
    return rec;
  }
};

TEST_F(ReentryEngineTest, TheSameOwnerAskingAgainIsRefusedAtOnceAnotherOwnerQueues) {
  MakeEngine();
  AcquireRecord* held = Granted(1, "r", Owner(5));
  AcquireRecord* again = Acquire(1, "r", 10'000, 30'000, false, false, Owner(5));
  ASSERT_TRUE(RunUntil([again] { return again->calls > 0; }));
  ASSERT_FALSE(again->granted());
  EXPECT_EQ(again->failure().code, ErrorCode::kWouldDeadlock);
  EXPECT_NE(again->failure().message.find(held->grant().token.substr(0, 8)), std::string::npos);
  AcquireRecord* other = Acquire(1, "r", 10'000, 30'000, false, false, Owner(6));
  RunFor(50);
  EXPECT_EQ(other->calls, 0) << "another owner of the session waits for the hold";
  Release(1, "r", held->grant().token);
  ASSERT_TRUE(RunUntil([other] { return other->calls > 0; }));
  EXPECT_TRUE(other->granted()) << other->Describe();
}

TEST_F(ReentryEngineTest, AReentrantHoldCountsItsAcquiresAndOnlyTheLastReleaseLetsGo) {
  MakeEngine();
  AcquireRecord* first = Granted(1, "r", Owner(5, /*reentrant=*/true));
  EXPECT_EQ(first->grant().depth, 1);
  const std::string token = first->grant().token;
  const auto sent = [this] {
    return node(0).Count(FakeNode::Op::kSet) + node(0).Count(FakeNode::Op::kKindScript);
  };
  const size_t before = sent();
  AcquireRecord* second = Granted(1, "r", Owner(5, true));
  EXPECT_EQ(second->grant().token, token);
  EXPECT_EQ(second->grant().depth, 2);
  EXPECT_EQ(second->grant().waited_ms, 0);
  EXPECT_EQ(sent(), before) << "nothing sent";
  EXPECT_EQ(engine_->Unwind(1, "r", token), std::optional<int>(1));
  EXPECT_EQ(node(0).Holder(Key("r")), token) << "held on the masters still";
  EXPECT_EQ(engine_->Unwind(1, "r", token), std::nullopt) << "the last release lets go";
  EXPECT_EQ(engine_->Unwind(2, "r", token), std::nullopt) << "another session's token";
  Release(1, "r", token);
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_FALSE(node(0).Holder(Key("r")).has_value());
}

TEST_F(ReentryEngineTest, AReadHoldIsNotTakenAgainAndAWriteBesideOnesOwnReadIsRefused) {
  MakeEngine();
  Granted(1, "doc", Owner(5, false, /*shared=*/true));
  // Read beside one's own read: granted as a second hold.
  Granted(1, "doc", Owner(5, false, true));
  // Write beside one's own reads, reentrant or not: it could only wait for them.
  for (bool reentrant : {false, true}) {
    AcquireRecord* write = Acquire(1, "doc", 10'000, 30'000, false, false, Owner(5, reentrant));
    ASSERT_TRUE(RunUntil([write] { return write->calls > 0; }));
    ASSERT_FALSE(write->granted());
    EXPECT_EQ(write->failure().code, ErrorCode::kWouldDeadlock);
  }
}

}  // namespace
}  // namespace lw::engine_test
