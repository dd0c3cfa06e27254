// LockEngine: Redlock rounds of an acquire (quorum, node timeouts, validity, retries, restart
// quarantine, release announcements from other agents).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

using ::testing::HasSubstr;

// 1.
TEST_F(LockEngineTest, GrantsWithFiveHealthyMasters) {
  MakeEngine();
  // A 10 s ttl: the lock cannot expire (and be deleted) during the test, however slow the box.
  AcquireRecord* a = Acquire(1, "res", 10000, 0);
  EXPECT_EQ(a->calls, 0) << "the callback must never run inside Acquire";
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->granted()) << a->Describe();
  const Grant& g = a->grant();
  EXPECT_TRUE(IsHexToken(g.token)) << g.token;
  EXPECT_GT(g.validity_ms, 0);
  EXPECT_LE(g.validity_ms, 10000 - (100 + 2));  // ttl - (ttl * 0.01 + 2)
  EXPECT_GE(g.waited_ms, 0);
  for (const auto& n : nodes_) {
    ASSERT_EQ(n->log().size(), 1u) << "node " << n->index();
    const auto& c = n->log()[0];
    EXPECT_EQ(c.op, Op::kSet);
    EXPECT_EQ(c.key, Key("res"));
    EXPECT_EQ(c.token, g.token);
    EXPECT_EQ(c.ttl_ms, 10000);
    EXPECT_EQ(n->Holder(Key("res")), g.token);
  }
  auto held = engine_->books().HeldBy(1);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].resource, "res");
  EXPECT_EQ(held[0].token, g.token);
  EXPECT_FALSE(held[0].renew);
  // The grant's validity is rounded down as it is answered, HeldBy's rounded up: at most the
  // millisecond of rounding apart, never more than the grant said.
  EXPECT_LE(held[0].validity_ms, g.validity_ms + 1);
  EXPECT_EQ(engine_->locks_held(), 1u);

  RunFor(30);
  EXPECT_EQ(a->calls, 1);
  EXPECT_EQ(TotalCommands(), 5u) << "nothing else may be sent for a granted lock";
}

// 2.
TEST_F(LockEngineTest, GrantsAtQuorumWithoutWaitingForSilentMasters) {
  // A 10 s node timeout: a grant that waited for the silent masters would take that long.
  MakeEngine(Options(/*node_timeout_ms=*/10000));
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  AcquireRecord* a = Acquire(1, "res", 30000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, 15000));
  ASSERT_TRUE(a->granted()) << a->Describe();
  EXPECT_LT(MsBetween(start, a->at), 5000) << "the grant must not wait for the node timeout";
  for (const auto& n : nodes_) {
    ASSERT_EQ(n->log().size(), 1u) << "node " << n->index();
    EXPECT_EQ(n->log()[0].token, a->grant().token);
  }
  EXPECT_EQ(engine_->books().HeldBy(1).size(), 1u);
}

// 3.
TEST_F(LockEngineTest, LateYesAfterNodeTimeoutNeverCounts) {
  MakeEngine(Options(/*node_timeout_ms=*/100));
  node(2).Hold();
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  EXPECT_NE(a->failure().message.find("2 of 5"), std::string::npos) << a->failure().message;
  EXPECT_GE(MsBetween(start, a->at), 95) << "the round ends at the node timeout";

  ASSERT_EQ(node(0).Commands(Op::kSet).size(), 1u);
  const std::string token = node(0).Commands(Op::kSet)[0].token;
  // The undo goes to all five, including the three that have not answered yet.
  ExpectDeletedEverywhere(Key("res"), token);

  // Now the stopped masters answer: a yes to the SET, then the queued DEL undoes it.
  for (int i = 2; i < 5; ++i) node(i).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  for (int i = 2; i < 5; ++i) {
    const auto sets = node(i).Commands(Op::kSet);
    ASSERT_EQ(sets.size(), 1u);
    ASSERT_TRUE(sets[0].reply.has_value());
    EXPECT_TRUE(IsClaimed(*sets[0].reply)) << "the late answer was a yes";
  }
  EXPECT_EQ(a->calls, 1);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 0u);
  for (const auto& n : nodes_) EXPECT_EQ(n->Holder(Key("res")), std::nullopt) << n->index();
}

// 3b. The same with answers that are slow rather than stopped.
TEST_F(LockEngineTest, DelayedYesAfterNodeTimeoutNeverCounts) {
  MakeEngine(Options(/*node_timeout_ms=*/60));
  for (int i = 2; i < 5; ++i) node(i).Delay(150);
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  const std::string token = node(0).Commands(Op::kSet).at(0).token;
  ExpectDeletedEverywhere(Key("res"), token);
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(a->calls, 1);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  for (const auto& n : nodes_) EXPECT_EQ(n->Holder(Key("res")), std::nullopt) << n->index();
}

// 3c. Three masters down and two slow: the round ends on the third failure, before the live
// ones answer. The message must say masters were down, not read like a plain timeout.
TEST_F(LockEngineTest, NoQuorumWithMastersDownSaysTheyWereDown) {
  MakeEngine(Options(/*node_timeout_ms=*/200));
  for (int i = 0; i < 3; ++i) node(i).Fail();
  for (int i = 3; i < 5; ++i) node(i).Delay(50);
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  const std::string message = std::get<Failure>(*a->result).message;
  EXPECT_THAT(message, ::testing::HasSubstr("only 0 of 5 masters answered in time (quorum is 3)"));
  EXPECT_THAT(message, ::testing::HasSubstr("3 could not be asked or failed (down, unreachable or an error "
                                 "reply), which ended the round before the others answered"));
  ASSERT_TRUE(RunUntilQuiet());
}

// 4.
TEST_F(LockEngineTest, NonPositiveValidityIsNotGranted) {
  // ttl 100, drift 1 + 2 ms: answers after 99 ms leave at most 100 - 99 - 3 < 0.
  MakeEngine(Options(/*node_timeout_ms=*/150));
  for (auto& n : nodes_) n->Delay(99);
  AcquireRecord* a = Acquire(1, "res", 100, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_FALSE(a->granted()) << "all five said yes, but too late to be valid";
  ASSERT_TRUE(a->result.has_value());
  const std::string token = node(0).Commands(Op::kSet).at(0).token;
  ExpectDeletedEverywhere(Key("res"), token);
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(a->calls, 1);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 0u);
  EXPECT_TRUE(lost_.empty());
}

// 5.
TEST_F(LockEngineTest, ContendedLockRetriesWithFreshTokensUntilWaitEnds) {
  constexpr int64_t kRetryDelayMs = 20;
  MakeEngine(Options(/*node_timeout_ms=*/50, kRetryDelayMs, /*retry_jitter_ms=*/10));
  // Held by the other owner for far longer than the test.
  for (int i = 0; i < 3; ++i) node(i).Put(Key("res"), "other-owner", 600000);
  constexpr int64_t kWaitMs = 1000;
  const auto start = Clock::now();
  AcquireRecord* a = Acquire(1, "res", 5000, kWaitMs);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, 20000));
  ASSERT_TRUE(a->failed(ErrorCode::kTimeout)) << a->Describe();
  const int64_t elapsed = MsBetween(start, a->at);
  EXPECT_GE(elapsed, kWaitMs - 1) << "gave up before wait_ms";
  EXPECT_LT(elapsed, 10 * kWaitMs) << "did not give up at wait_ms";
  ASSERT_TRUE(RunUntilQuiet());  // let the last undo land
  RunFor(10);

  const auto tokens = Tokens(node(0), Op::kSet, Key("res"));
  EXPECT_GE(tokens.size(), 3u) << "several attempts within wait_ms";
  // An attempt starts at most once per retry delay (a timer never fires early), however long
  // the wait really took.
  EXPECT_LE(static_cast<int64_t>(tokens.size()), elapsed / kRetryDelayMs + 1)
      << "attempts must be spaced by the retry delay";
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size())
      << "each attempt uses a fresh token";
  for (const auto& t : tokens) EXPECT_TRUE(IsHexToken(t)) << t;
  for (const auto& n : nodes_) {
    EXPECT_EQ(Tokens(*n, Op::kSet, Key("res")), tokens) << "every attempt goes to every master";
    // One attempt at a time: SET t1, DEL t1, SET t2, DEL t2, ..., and once it gives up, its
    // agent leaves the queue its refusals put it in.
    const auto& log = n->log();
    ASSERT_EQ(log.size(), 2 * tokens.size() + 1) << "node " << n->index();
    EXPECT_EQ(log.back().script, scripts::KindScript::kLeaveQueue);
    for (size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_EQ(log[2 * i].op, Op::kSet);
      EXPECT_EQ(log[2 * i].token, tokens[i]);
      EXPECT_EQ(log[2 * i].ttl_ms, 5000);
      EXPECT_EQ(log[2 * i + 1].op, Op::kDelete);
      EXPECT_EQ(log[2 * i + 1].token, tokens[i]) << "each attempt is undone with its own token";
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node(i).Holder(Key("res")), "other-owner");
  for (int i = 3; i < 5; ++i) EXPECT_EQ(node(i).Holder(Key("res")), std::nullopt);
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
}

// 6.
TEST_F(LockEngineTest, TooFewMastersAnsweringIsNoQuorumNotTimeout) {
  MakeEngine();
  for (int i = 0; i < 3; ++i) node(i).Fail();
  AcquireRecord* once = Acquire(1, "a", 5000, 0);
  // Long enough for a retry (20-30 ms apart) even if the loop is held up now and then.
  AcquireRecord* retried = Acquire(2, "b", 5000, 1000);
  ASSERT_TRUE(RunUntil([&] { return once->calls > 0 && retried->calls > 0; }, 15000));
  for (AcquireRecord* a : {once, retried}) {
    ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
    // The count is what was tallied when the round was decided: the three failures may
    // arrive before the two yes votes, so anything from 0 to 2 is right.
    const std::string& msg = a->failure().message;
    EXPECT_TRUE(msg.find("0 of 5") != std::string::npos ||
                msg.find("1 of 5") != std::string::npos || msg.find("2 of 5") != std::string::npos)
        << msg;
    EXPECT_NE(msg.find("quorum is 3"), std::string::npos) << msg;
  }
  EXPECT_GE(Tokens(node(3), Op::kSet, Key("b")).size(), 2u) << "it retried within wait_ms";
  ExpectDeletedEverywhere(Key("a"), Tokens(node(3), Op::kSet, Key("a")).at(0));
  ASSERT_TRUE(RunUntilQuiet());
  for (int i = 3; i < 5; ++i) {
    EXPECT_EQ(node(i).Holder(Key("a")), std::nullopt);
    EXPECT_EQ(node(i).Holder(Key("b")), std::nullopt);
  }
}
TEST_F(LockEngineTest, QuarantinedMastersDoNotCountTowardAcquireQuorum) {
  MakeEngine();
  for (int i = 0; i < 3; ++i) nodes_[i]->Quarantine(true);
  AcquireRecord* a = Acquire(1, "res", 1000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  EXPECT_THAT(a->failure().message, HasSubstr("3 of 5 masters are in restart quarantine"));
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Count(Op::kSet), 1u) << "quarantined masters still get the command";
    EXPECT_EQ(n->Holder(Key("res")), std::nullopt) << "and its undo";
  }
  nodes_[0]->Quarantine(false);
  AcquireRecord* b = Acquire(1, "res", 1000, 0);
  ASSERT_TRUE(RunUntil([b] { return b->calls > 0; }));
  EXPECT_TRUE(b->granted()) << "3 counting masters: 0, 3, 4. " << b->Describe();
}
class FakeWatch : public ReleaseWatch {
 public:
  void Watch(const std::string& key) override { watched.insert(key); }
  void Unwatch(const std::string& key) override {
    watched.erase(key);
    ++unwatches;
  }
  std::set<std::string> watched;
  int unwatches = 0;
};

TEST_F(LockEngineTest, AWaiterForAKeyHeldElsewhereTriesAgainWhenItsReleaseIsAnnounced) {
  FakeWatch watch;
  // The retry would come only after 20 s: a grant within 10 s of the announcement is its doing.
  EngineOptions options = Options(/*node_timeout_ms=*/50, /*retry_delay_ms=*/20000,
                                  /*retry_jitter_ms=*/0);
  options.release_watch = &watch;
  MakeEngine(options);
  for (auto& n : nodes_) n->Put(Key("res"), "another-agent", 600'000);
  AcquireRecord* a = Acquire(1, "res", 1000, 60'000);
  ASSERT_TRUE(RunUntil([&] { return watch.watched.count(Key("res")) == 1; }));
  engine_->ReleasedElsewhere(Key("unrelated"));  // ignored
  for (auto& n : nodes_) n->Erase(Key("res"));
  engine_->ReleasedElsewhere(Key("res"));
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, /*timeout_ms=*/10000))
      << "without the announcement the retry would come only after 20 s";
  EXPECT_TRUE(a->granted()) << a->Describe();
  Release(1, "res", a->grant().token);
  ASSERT_TRUE(RunUntil([&] { return watch.watched.empty(); }));
  EXPECT_EQ(watch.unwatches, 1) << "the watch ends when nobody here wants the key any more";
}

}  // namespace
}  // namespace lw::engine_test
