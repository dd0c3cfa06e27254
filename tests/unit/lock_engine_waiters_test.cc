// LockEngine: local waiters (FIFO per resource, wait deadlines) and local hand-off.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

// 7.
// Turns (docs/safety.md, "Fair turns"): a hand-off goes only to a waiter that a grant through
// the masters heard come before everyone waiting on another agent.
TEST_F(LockEngineTest, WhereHoldsTakeTurnsAHandOffNeedsAGrantThatHeardWhoWaitsElsewhere) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");  // uncontended: its grant asked nothing
  AcquireRecord* a2 = Acquire(2, "res", 10000, 5000);
  AcquireRecord* a3 = Acquire(3, "res", 10000, 5000);
  RunFor(20);
  Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  EXPECT_EQ(node(0).Count(Op::kSet), 2u) << "a2's turn went through the masters";
  EXPECT_EQ(stats_.handoffs_in_turn.Value(), 1);
  EXPECT_EQ(stats_.local_handoffs.Value(), 0);
  // a2's claim, with a3 behind it, asked who waits elsewhere: nobody. a3 came before that.
  Release(2, "res", a2->grant().token);
  ASSERT_TRUE(RunUntil([a3] { return a3->calls > 0; }));
  ASSERT_TRUE(a3->granted()) << a3->Describe();
  EXPECT_EQ(node(0).Count(Op::kSet), 2u) << "a3 was handed the key";
  EXPECT_EQ(stats_.local_handoffs.Value(), 1);
}

TEST_F(LockEngineTest, LocalWaitersAreServedInFifoOrder) {
  MakeEngine(LocalFirst());
  const std::string t1 = Hold(1, "res");
  AcquireRecord* a2 = Acquire(2, "res", 10000, 5000);
  AcquireRecord* a3 = Acquire(3, "res", 10000, 5000);
  AcquireRecord* a4 = Acquire(4, "res", 10000, 5000);
  RunFor(80);
  EXPECT_EQ(node(0).Count(Op::kSet), 1u) << "no waiter contends while a local session holds";
  EXPECT_EQ(a2->calls + a3->calls + a4->calls, 0);

  Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  RunFor(50);
  EXPECT_EQ(a3->calls + a4->calls, 0);

  Release(2, "res", a2->grant().token);
  ASSERT_TRUE(RunUntil([a3] { return a3->calls > 0; }));
  ASSERT_TRUE(a3->granted()) << a3->Describe();
  RunFor(20);
  EXPECT_EQ(a4->calls, 0);

  Release(3, "res", a3->grant().token);
  ASSERT_TRUE(RunUntil([a4] { return a4->calls > 0; }));
  ASSERT_TRUE(a4->granted()) << a4->Describe();
  EXPECT_EQ(grant_order_, (std::vector<SessionId>{1, 2, 3, 4}));
  // Same ttl, most of the validity left: each release handed the key on locally.
  EXPECT_EQ(node(0).Count(Op::kSet), 1u);
  EXPECT_EQ(node(0).Count(Op::kDelete), 0u);
  EXPECT_EQ(node(0).Holder(Key("res")), t1);
}

// A release with a local waiter next in line whose ttl matches hands the masters' key over as
// it is: no delete, no new SET, the waiter's validity is what was left of the holder's, and
// its own token is new. The key keeps the first token (the lease): extends and the final
// release use it, and the previous holder's token no longer releases anything.
TEST_F(LockEngineTest, ReleaseHandsTheKeyToTheNextLocalWaiterWithoutARoundTrip) {
  MakeEngine(LocalFirst());
  const auto held_from = Clock::now();  // the holder's validity counts from after this
  AcquireRecord* a1 = Acquire(1, "res", 10000, 0);
  ASSERT_TRUE(RunUntil([a1] { return a1->calls > 0; }));
  ASSERT_TRUE(a1->granted()) << a1->Describe();
  const std::string t1 = a1->grant().token;
  const int64_t holder_validity = a1->grant().validity_ms;
  AcquireRecord* a2 = Acquire(2, "res", 10000, 5000);
  RunFor(20);
  const size_t before = node(0).log().size();
  ReleaseRecord* r = Release(1, "res", t1);
  EXPECT_EQ(r->calls, 0) << "the release's callback never runs inside Release";
  ASSERT_TRUE(RunUntil([&] { return r->calls > 0 && a2->calls > 0; }));
  EXPECT_EQ(r->failure, std::nullopt);
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  const std::string t2 = a2->grant().token;
  EXPECT_NE(t2, t1);
  // What was left of the holder's validity at the hand-off: all of it but the time since.
  EXPECT_GE(a2->grant().validity_ms, holder_validity - MsBetween(held_from, a2->at) - 1);
  EXPECT_LE(a2->grant().validity_ms, holder_validity + 1);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->log().size(), before) << "node " << n->index() << ": nothing sent";
    EXPECT_EQ(n->Holder(Key("res")), t1);
  }
  ASSERT_EQ(engine_->books().HeldBy(2).size(), 1u);
  EXPECT_EQ(engine_->books().HeldBy(2)[0].token, t2);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  ReleaseRecord* stale = Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([&] { return stale->calls > 0; }));
  ASSERT_TRUE(stale->failure.has_value());
  EXPECT_EQ(stale->failure->code, ErrorCode::kNotHeld);

  ExtendRecord* e = Extend(2, "res", t2, 20000);
  ASSERT_TRUE(RunUntil([&] { return e->calls > 0; }));
  EXPECT_TRUE(e->extended()) << "extended with the lease";
  EXPECT_EQ(node(0).Commands(Op::kExtend).back().token, t1);

  // An extend in flight holds the hand-off back: the key's expiry may still change.
  AcquireRecord* a3 = Acquire(3, "res", 10000, 5000);
  RunFor(20);
  ExtendRecord* shorter = Extend(2, "res", t2, 2000);
  ReleaseRecord* last = Release(2, "res", t2);
  ASSERT_TRUE(RunUntil([&] { return last->calls > 0; }));
  EXPECT_EQ(last->failure, std::nullopt);
  ASSERT_TRUE(RunUntilQuiet());
  ASSERT_TRUE(a3->granted()) << a3->Describe();
  EXPECT_EQ(shorter->calls, 1);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Commands(Op::kDelete).back().token, t1) << "node " << n->index();
    EXPECT_EQ(n->Holder(Key("res")), a3->grant().token) << "node " << n->index();
  }
}

// Handing over locally needs the same ttl (the key was set for the holder's) and at least half
// of the waiter's ttl left; a fenced waiter needs a fence from the masters.
TEST_F(LockEngineTest, AHandOverGoesThroughTheMastersWhenTheKeyDoesNotFitTheWaiter) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");
  AcquireRecord* other_ttl = Acquire(2, "res", 20000, 5000);
  RunFor(20);
  Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([&] { return other_ttl->calls > 0; }));
  ASSERT_TRUE(other_ttl->granted());
  EXPECT_EQ(node(0).Count(Op::kSet), 2u);
  EXPECT_EQ(node(0).Holder(Key("res")), other_ttl->grant().token);

  AcquireRecord* fenced = Acquire(3, "res", 20000, 5000, /*renew=*/false, /*fence=*/true);
  RunFor(20);
  Release(2, "res", other_ttl->grant().token);
  ASSERT_TRUE(RunUntil([&] { return fenced->calls > 0; }));
  ASSERT_TRUE(fenced->granted()) << fenced->Describe();
  ASSERT_TRUE(fenced->grant().fence.has_value());
  EXPECT_EQ(node(0).Holder(Key("res")), fenced->grant().token);
}

// 7b.
TEST_F(LockEngineTest, OnlyTheHeadWaiterContendsOnRedis) {
  MakeEngine(Options(/*node_timeout_ms=*/50, /*retry_delay_ms=*/20, /*retry_jitter_ms=*/10));
  for (int i = 0; i < 3; ++i) node(i).Put(Key("res"), "other-owner", 60000);
  const auto start = Clock::now();
  AcquireRecord* a1 = Acquire(1, "res", 10000, 30000);
  AcquireRecord* a2 = Acquire(2, "res", 10000, 30000);
  AcquireRecord* a3 = Acquire(3, "res", 10000, 30000);
  RunFor(500);
  const int64_t elapsed = MsBetween(start, Clock::now());
  EXPECT_EQ(a1->calls + a2->calls + a3->calls, 0);
  const int64_t contended = static_cast<int64_t>(node(0).Count(Op::kSet));
  EXPECT_GE(contended, 2);
  // One contender starts an attempt at most every 20 ms (its retry timer never fires early);
  // three would start three times as many.
  EXPECT_LE(contended, elapsed / 20 + 1) << "one contender retrying every 20-30 ms, not three";
  for (const auto& n : nodes_) {
    // Strict SET/DEL alternation: never two attempts in flight.
    const auto& log = n->log();
    for (size_t i = 0; i + 1 < log.size(); i += 2) {
      EXPECT_EQ(log[i].op, Op::kSet);
      EXPECT_EQ(log[i + 1].op, Op::kDelete);
      EXPECT_EQ(log[i + 1].token, log[i].token);
    }
  }

  for (int i = 0; i < 3; ++i) node(i).Erase(Key("res"));  // the other owner lets go
  ASSERT_TRUE(RunUntil([a1] { return a1->calls > 0; }));
  ASSERT_TRUE(a1->granted()) << a1->Describe();
  EXPECT_EQ(Tokens(node(0), Op::kSet, Key("res")).back(), a1->grant().token);
  const size_t at_grant = node(0).Count(Op::kSet);
  RunFor(100);
  EXPECT_EQ(node(0).Count(Op::kSet), at_grant) << "waiters behind a local holder stay quiet";
  EXPECT_EQ(a2->calls + a3->calls, 0);

  Release(1, "res", a1->grant().token);
  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  Release(2, "res", a2->grant().token);
  ASSERT_TRUE(RunUntil([a3] { return a3->calls > 0; }));
  ASSERT_TRUE(a3->granted()) << a3->Describe();
  EXPECT_EQ(grant_order_, (std::vector<SessionId>{1, 2, 3}));
}

// 8.
TEST_F(LockEngineTest, LocalWaiterTimesOutWithoutRedisTraffic) {
  MakeEngine();
  // Held for 60 s: a waiter that did not give up at its wait_ms would wait for that.
  const std::string t1 = Hold(1, "res", 60000);
  ASSERT_FALSE(t1.empty());
  const auto start = Clock::now();
  AcquireRecord* head = Acquire(2, "res", 10000, 100);
  AcquireRecord* behind = Acquire(3, "res", 10000, 150);
  ASSERT_TRUE(RunUntil([&] { return head->calls > 0 && behind->calls > 0; }, 30000));
  for (AcquireRecord* a : {head, behind}) {
    ASSERT_TRUE(a->failed(ErrorCode::kTimeout)) << a->Describe();
    EXPECT_NE(a->failure().message.find("another session of this agent"), std::string::npos)
        << a->failure().message;
  }
  EXPECT_GE(MsBetween(start, head->at), 100 - 1);
  EXPECT_LT(MsBetween(start, head->at), 30000) << "at its wait_ms, long before the holder's end";
  EXPECT_GE(MsBetween(start, behind->at), 150 - 1);
  EXPECT_LT(MsBetween(start, behind->at), 30000) << "at its wait_ms, long before the holder's end";
  EXPECT_EQ(TotalCommands(), 5u) << "only session 1's SET was ever sent";
  ASSERT_EQ(engine_->books().HeldBy(1).size(), 1u);
  EXPECT_EQ(engine_->books().HeldBy(1)[0].token, t1);
}

// 9.
TEST_F(LockEngineTest, ReleaseDeletesEverywhereBeforeTheNextWaiterSets) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");
  // Another ttl: the key set for t1's cannot simply be handed over (see above).
  AcquireRecord* a2 = Acquire(2, "res", 20000, 5000);
  RunFor(20);
  ReleaseRecord* r = Release(1, "res", t1);
  EXPECT_EQ(r->calls, 0) << "the callback must never run inside Release";
  ASSERT_TRUE(RunUntil([&] { return r->calls > 0 && a2->calls > 0; }));
  EXPECT_EQ(r->failure, std::nullopt);
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  const std::string t2 = a2->grant().token;
  EXPECT_NE(t2, t1);
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) {
    const auto& log = n->log();
    ASSERT_EQ(log.size(), 3u) << "node " << n->index();
    EXPECT_EQ(log[0].op, Op::kSet);
    EXPECT_EQ(log[0].token, t1);
    EXPECT_EQ(log[1].op, Op::kDelete);
    EXPECT_EQ(log[1].token, t1);
    EXPECT_EQ(log[1].key, Key("res"));
    EXPECT_EQ(log[2].op, Op::kSet);
    EXPECT_EQ(log[2].token, t2);
    EXPECT_EQ(n->Holder(Key("res")), t2);
  }
  EXPECT_EQ(r->calls, 1);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  ASSERT_EQ(engine_->books().HeldBy(2).size(), 1u);
  EXPECT_EQ(engine_->books().HeldBy(2)[0].token, t2);
}

// 10.
TEST_F(LockEngineTest, ReleaseWithWrongTokenOrSessionIsNotHeld) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");
  ReleaseRecord* wrong_token = Release(1, "res", std::string(40, '0'));
  ReleaseRecord* wrong_session = Release(2, "res", t1);
  ReleaseRecord* wrong_resource = Release(1, "other", t1);
  EXPECT_EQ(wrong_token->calls + wrong_session->calls + wrong_resource->calls, 0);
  ASSERT_TRUE(RunUntil([&] {
    return wrong_token->calls > 0 && wrong_session->calls > 0 && wrong_resource->calls > 0;
  }));
  for (ReleaseRecord* r : {wrong_token, wrong_session, wrong_resource}) {
    ASSERT_TRUE(r->failure.has_value());
    EXPECT_EQ(r->failure->code, ErrorCode::kNotHeld);
    EXPECT_EQ(r->calls, 1);
  }
  RunFor(20);
  EXPECT_EQ(TotalCommands(), 5u) << "nothing may be sent for a refused release";
  ASSERT_EQ(engine_->books().HeldBy(1).size(), 1u);
  EXPECT_EQ(engine_->books().HeldBy(1)[0].token, t1);

  ReleaseRecord* ok = Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([ok] { return ok->calls > 0; }));
  EXPECT_EQ(ok->failure, std::nullopt);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
}

}  // namespace
}  // namespace lw::engine_test
