// Rounds: one command to every master, votes counted until a decision, every answer or the
// deadline.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

// ---- Rounds -----------------------------------------------------------------------------------

class RoundsTest : public LoopTest {
 protected:
  void DestroyUsers() override { rounds_.reset(); }

  struct Result {
    int calls = 0;
    std::optional<VoteTally> tally;
    Clock::time_point at;
  };

  Result* Run(RoundOp op, bool wait_all, const std::string& key = "k",
              const std::string& token = "t") {
    Result* res = &results_.emplace_back();
    RoundRequest req;
    req.op = op;
    req.key = key;
    req.token = token;
    req.ttl_ms = 1000;
    req.wait_all = wait_all;
    if (op == RoundOp::kKindAcquire) {  // an exclusive acquire: the fake records it as kSet
      req.script = scripts::KindScript::kClaimExclusive;
      req.keys = {key, key + ":readers", key + ":waiting"};
      req.args = {"1000", "1000", token};
    }
    rounds_->Run(std::move(req), [res](const RoundResult& r) {
      ++res->calls;
      res->tally = r.tally;
      res->at = Clock::now();
    });
    return res;
  }

  std::unique_ptr<Rounds> rounds_;
  std::deque<Result> results_;
};

// 17.
TEST_F(RoundsTest, AnswersAfterTheDeadlineAreIgnored) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 50);
  for (int i = 2; i < 5; ++i) node(i).Hold();
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kKindAcquire, /*wait_all=*/false);
  EXPECT_EQ(r->calls, 0) << "done must never run inside Run";
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  EXPECT_GE(MsBetween(start, r->at), 45);
  EXPECT_EQ(r->tally->yes(), 2);
  EXPECT_EQ(r->tally->outstanding(), 3);
  EXPECT_FALSE(r->tally->Won());
  EXPECT_EQ(rounds_->in_flight(), 0u);

  for (int i = 2; i < 5; ++i) node(i).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r->calls, 1) << "late answers must not end the round again";
  EXPECT_EQ(r->tally->yes(), 2);
  for (int i = 2; i < 5; ++i) {
    ASSERT_TRUE(node(i).log()[0].reply.has_value());
    EXPECT_EQ(node(i).log()[0].reply->kind, Reply::Kind::kInteger);
  }
}

TEST_F(RoundsTest, EndsAtQuorumAndIgnoresTheRest) {
  // The other two answer only when the test lets them, and the deadline is 20 s away: the
  // round can only have ended on the quorum.
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 20000);
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kKindAcquire, /*wait_all=*/false);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }, 15000));
  EXPECT_LT(MsBetween(start, r->at), 10000) << "waited for the deadline";
  EXPECT_TRUE(r->tally->Won());
  EXPECT_EQ(r->tally->yes(), 3);
  EXPECT_EQ(r->tally->outstanding(), 2);
  node(3).ReleaseHeld();
  node(4).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r->calls, 1);
  EXPECT_EQ(r->tally->yes(), 3);
}

TEST_F(RoundsTest, EndsAsSoonAsQuorumIsOutOfReach) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 20000);
  for (int i = 0; i < 3; ++i) node(i).Put("k", "other", 600000);
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kKindAcquire, /*wait_all=*/false);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }, 15000));
  EXPECT_LT(MsBetween(start, r->at), 10000) << "no need to wait for the (20 s) deadline";
  EXPECT_TRUE(r->tally->Lost());
  EXPECT_EQ(r->tally->no(), 3);
  node(3).ReleaseHeld();
  node(4).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r->calls, 1);
}

TEST_F(RoundsTest, WaitAllEndsOnceEveryMasterAnswered) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 20000);
  for (int i = 0; i < 3; ++i) node(i).Put("k", "t", 600000);
  node(3).Fail();
  node(4).Delay(40);
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kDeleteIfHeld, /*wait_all=*/true);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }, 15000));
  EXPECT_GE(MsBetween(start, r->at), 40 - 1) << "waited for the slow master";
  EXPECT_LT(MsBetween(start, r->at), 10000) << "did not wait for the (20 s) deadline";
  EXPECT_TRUE(r->tally->AllIn());
  EXPECT_EQ(r->tally->yes(), 3);
  EXPECT_EQ(r->tally->no(), 1);
  EXPECT_EQ(r->tally->failed(), 1);
  RunFor(20);
  EXPECT_EQ(r->calls, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node(i).Holder("k"), std::nullopt);
}

TEST_F(RoundsTest, ConcurrentRoundsEachEndExactlyOnce) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 60);
  for (int i = 0; i < 3; ++i) node(i).Hold();
  Result* r1 = Run(RoundOp::kExtendIfHeld, /*wait_all=*/false, "k1");
  RunFor(15);
  Result* r2 = Run(RoundOp::kExtendIfHeld, /*wait_all=*/true, "k2");
  ASSERT_TRUE(RunUntil([&] { return r1->calls > 0 && r2->calls > 0; }));
  EXPECT_LE(r1->at, r2->at) << "deadlines come in start order";
  EXPECT_EQ(r1->tally->outstanding(), 3);
  EXPECT_EQ(r2->tally->outstanding(), 3);
  EXPECT_EQ(r1->tally->no(), 2);  // nothing to extend on the answering masters
  for (int i = 0; i < 3; ++i) node(i).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r1->calls, 1);
  EXPECT_EQ(r2->calls, 1);
  EXPECT_EQ(rounds_->in_flight(), 0u);
}

// The loop, not the masters, is late: every master answers 10 ms into a 50 ms round, and the
// loop is then busy for 120 ms in one turn (the stall is the event under test). When it wakes,
// the deadline is past but the answers wait in its sockets: they count, and the round is won.
TEST_F(RoundsTest, AnswersWaitingWhenALateLoopWakesCountBeforeTheDeadline) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 50);
  for (int i = 0; i < kNodes; ++i) {
    node(i).ThroughPoll();
    node(i).Hold();
  }
  Result* r = Run(RoundOp::kKindAcquire, /*wait_all=*/false);
  // A check handle runs after a poll, and the deadline timer fires at the start of a turn,
  // before its poll: the stall in a check callback puts the next turn's timers first. The
  // handles live on the heap until libuv closed them (after this test's body, in TearDown).
  struct Stall {
    uv_check_t check;
    uv_idle_t idle;  // keeps the first poll from blocking until the deadline
    std::vector<FakeNode*> nodes;
    bool done = false;
    int open = 2;
  };
  auto* stall = new Stall;
  for (int i = 0; i < kNodes; ++i) stall->nodes.push_back(&node(i));
  uv_check_init(&loop_, &stall->check);
  uv_idle_init(&loop_, &stall->idle);
  stall->check.data = stall;
  stall->idle.data = stall;
  struct Closer {
    Stall* s;
    ~Closer() {
      auto closed = [](uv_handle_t* h) {
        auto* st = static_cast<Stall*>(h->data);
        if (--st->open == 0) delete st;
      };
      uv_close(reinterpret_cast<uv_handle_t*>(&s->check), closed);
      uv_close(reinterpret_cast<uv_handle_t*>(&s->idle), closed);
    }
  } closer{stall};
  uv_idle_start(&stall->idle, [](uv_idle_t*) {});
  uv_check_start(&stall->check, [](uv_check_t* c) {
    auto* st = static_cast<Stall*>(c->data);
    if (st->done) return;
    st->done = true;
    uv_idle_stop(&st->idle);
    for (FakeNode* n : st->nodes) n->ReleaseHeld();
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  });
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  ASSERT_TRUE(stall->done);
  EXPECT_TRUE(r->tally->Won()) << "answers read after the deadline fired were not counted";
  EXPECT_GE(r->tally->yes(), 3);
}

// Without answers in the sockets, a late loop still ends the round at its first look.
TEST_F(RoundsTest, ALateLoopStillEndsAnUnansweredRound) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 50);
  for (int i = 0; i < kNodes; ++i) {
    node(i).ThroughPoll();
    node(i).Hold();
  }
  Result* r = Run(RoundOp::kKindAcquire, /*wait_all=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // the loop is busy elsewhere
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  EXPECT_FALSE(r->tally->Won());
  EXPECT_EQ(r->tally->outstanding(), kNodes);
  EXPECT_EQ(rounds_->in_flight(), 0u);
}

}  // namespace
}  // namespace lw::engine_test
