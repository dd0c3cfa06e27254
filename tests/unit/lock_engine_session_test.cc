// LockEngine: closing sessions and shutting down.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

// 14.
TEST_F(LockEngineTest, CloseSessionReleasesLocksAndDropsWaitersSilently) {
  MakeEngine();
  const std::string ta = Hold(1, "a");
  const std::string tb = Hold(1, "b");
  const std::string tc = Hold(3, "c");
  AcquireRecord* s1_waits_c = Acquire(1, "c", 10000, 200);
  AcquireRecord* s2_waits_a = Acquire(2, "a", 10000, 5000);
  RunFor(20);
  EXPECT_EQ(s1_waits_c->calls + s2_waits_a->calls, 0);

  engine_->CloseSession(1);
  ASSERT_TRUE(RunUntil([s2_waits_a] { return s2_waits_a->calls > 0; }));
  ASSERT_TRUE(s2_waits_a->granted()) << s2_waits_a->Describe();
  ExpectDeletedEverywhere(Key("a"), ta);
  ExpectDeletedEverywhere(Key("b"), tb);
  for (const auto& n : nodes_) {
    const auto sets = Tokens(*n, Op::kSet, Key("a"));
    ASSERT_EQ(sets.size(), 2u);
    EXPECT_EQ(sets[1], s2_waits_a->grant().token);
    EXPECT_LT(IndexOf(*n, Op::kDelete, ta), IndexOf(*n, Op::kSet, sets[1]));
  }
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());

  RunFor(300);  // well past the dropped waiter's wait_ms
  EXPECT_EQ(s1_waits_c->calls, 0) << "a closed session's waiters are not called back";
  Release(3, "c", tc);
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(30);
  EXPECT_EQ(s1_waits_c->calls, 0);
  for (const auto& n : nodes_) {
    EXPECT_EQ(Tokens(*n, Op::kSet, Key("c")).size(), 1u) << "the dropped waiter never contends";
    EXPECT_EQ(n->Holder(Key("c")), std::nullopt);
    EXPECT_EQ(n->Holder(Key("b")), std::nullopt);
  }
}

// 15.
TEST_F(LockEngineTest, CloseSessionDuringAttemptUndoesTheWinAndHandsOver) {
  MakeEngine(Options(/*node_timeout_ms=*/200));
  for (auto& n : nodes_) n->Delay(40);
  AcquireRecord* a1 = Acquire(1, "res", 10000, 3000);
  AcquireRecord* a2 = Acquire(2, "res", 10000, 3000);
  ASSERT_EQ(node(0).Count(Op::kSet), 1u) << "session 1's attempt is in flight";
  const std::string t1 = node(0).log()[0].token;
  engine_->CloseSession(1);

  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  const std::string t2 = a2->grant().token;
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) {
    const auto& log = n->log();
    ASSERT_EQ(log.size(), 3u) << "node " << n->index();
    EXPECT_EQ(log[0].op, Op::kSet);
    EXPECT_EQ(log[0].token, t1);
    ASSERT_TRUE(log[0].reply.has_value());
    EXPECT_TRUE(IsClaimed(*log[0].reply)) << "session 1's attempt won on every master";
    EXPECT_EQ(log[1].op, Op::kDelete);
    EXPECT_EQ(log[1].token, t1);
    EXPECT_EQ(log[2].op, Op::kSet);
    EXPECT_EQ(log[2].token, t2);
    EXPECT_EQ(n->Holder(Key("res")), t2);
  }
  EXPECT_EQ(a1->calls, 0);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 1u);
  EXPECT_TRUE(lost_.empty());
}

// 16.
TEST_F(LockEngineTest, ShutdownFailsWaitersReleasesLocksThenCallsDone) {
  MakeEngine(Options(/*node_timeout_ms=*/200));
  const std::string ta = Hold(1, "a");
  AcquireRecord* waits_a = Acquire(2, "a", 10000, 5000);
  for (auto& n : nodes_) n->Delay(40);
  AcquireRecord* contends_b = Acquire(3, "b", 10000, 5000);
  ASSERT_EQ(Tokens(node(0), Op::kSet, Key("b")).size(), 1u);
  const std::string tb = Tokens(node(0), Op::kSet, Key("b"))[0];

  int done_calls = 0;
  bool all_answered_at_done = false;
  engine_->Shutdown([&] {
    ++done_calls;
    all_answered_at_done = TotalPending() == 0;
  });
  ASSERT_TRUE(RunUntil([&] { return done_calls > 0; }));
  EXPECT_TRUE(waits_a->failed(ErrorCode::kShuttingDown)) << waits_a->Describe();
  EXPECT_TRUE(contends_b->failed(ErrorCode::kShuttingDown)) << contends_b->Describe();
  ExpectDeletedEverywhere(Key("a"), ta);
  ExpectDeletedEverywhere(Key("b"), tb);  // the attempt in flight is undone too
  EXPECT_TRUE(all_answered_at_done) << "done must wait for every delete round";
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Holder(Key("a")), std::nullopt);
    EXPECT_EQ(n->Holder(Key("b")), std::nullopt);
  }
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());

  const size_t sent = TotalCommands();
  AcquireRecord* late = Acquire(4, "c", 10000, 1000);
  EXPECT_EQ(late->calls, 0) << "the callback must never run inside Acquire";
  ASSERT_TRUE(RunUntil([late] { return late->calls > 0; }));
  EXPECT_TRUE(late->failed(ErrorCode::kShuttingDown)) << late->Describe();
  RunFor(100);
  EXPECT_EQ(TotalCommands(), sent);
  EXPECT_EQ(done_calls, 1);
  EXPECT_EQ(waits_a->calls, 1);
  EXPECT_EQ(contends_b->calls, 1);
}

// 16b.
TEST_F(LockEngineTest, ShutdownWithNothingToReleaseCallsDoneFromTheLoop) {
  MakeEngine();
  int done_calls = 0;
  engine_->Shutdown([&] { ++done_calls; });
  EXPECT_EQ(done_calls, 0);
  ASSERT_TRUE(RunUntil([&] { return done_calls > 0; }));
  RunFor(20);
  EXPECT_EQ(done_calls, 1);
  EXPECT_EQ(TotalCommands(), 0u);
}

// A hold granted to another session than the acquiring one (a detached lease): closing the
// acquiring session leaves it; its owner releases it; Shutdown leaves it on the masters.
TEST_F(LockEngineTest, AHoldGrantedAsAnotherSessionOutlivesTheAcquiringOne) {
  MakeEngine();
  constexpr SessionId kOwner = 1000;
  int calls = 0;
  std::string token;
  engine_->Acquire(
      1, "lease", 10000, 0, false,
      [&](const std::variant<Grant, Failure>& r) {
        ++calls;
        if (const auto* g = std::get_if<Grant>(&r)) token = g->token;
      },
      false, AcquireKind{.shape = LockShape{}, .shared = false, .hold_as = kOwner, .payload = {}});
  ASSERT_TRUE(RunUntil([&] { return calls > 0; }));
  ASSERT_FALSE(token.empty());
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  ASSERT_EQ(engine_->books().HeldBy(kOwner).size(), 1u);
  engine_->CloseSession(1);
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(node(0).Holder(Key("lease")), token) << "closing the acquiring session keeps it";
  ReleaseRecord* wrong = Release(1, "lease", token);
  ASSERT_TRUE(RunUntil([wrong] { return wrong->calls > 0; }));
  ASSERT_TRUE(wrong->failure.has_value());
  EXPECT_EQ(wrong->failure->code, ErrorCode::kNotHeld);

  // A second one, left on the masters by Shutdown while the first is released before it.
  const size_t before = acquires_.size();
  engine_->Acquire(
      2, "kept", 10000, 0, false,
      [&](const std::variant<Grant, Failure>& r) { calls += std::holds_alternative<Grant>(r); },
      false, AcquireKind{.shape = LockShape{}, .shared = false, .hold_as = kOwner, .payload = {}});
  ASSERT_TRUE(RunUntil([&] { return calls > 1; }));
  EXPECT_EQ(acquires_.size(), before);
  ReleaseRecord* right = Release(kOwner, "lease", token);
  ASSERT_TRUE(RunUntil([right] { return right->calls > 0; }));
  EXPECT_FALSE(right->failure.has_value());
  ExpectDeletedEverywhere(Key("lease"), token);
  const std::string kept = *node(0).Holder(Key("kept"));
  bool done = false;
  engine_->Shutdown([&] { done = true; });
  ASSERT_TRUE(RunUntil([&] { return done; }));
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Holder(Key("kept")), kept) << "a detached hold ends by its ttl, not with the agent";
  }
}

}  // namespace
}  // namespace lw::engine_test
