// LockEngine::Resume: a hold of an earlier run taken over by token, confirmed on a quorum like
// an extend; nothing that cannot be confirmed is held.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

class ResumeEngineTest : public LockEngineTest {
 protected:
  AcquireRecord* Resume(SessionId session, const std::string& resource, const std::string& token,
                        int64_t ttl_ms = 10'000, bool confirm_first = false) {
    AcquireRecord* rec = &acquires_.emplace_back();
    rec->session = session;
    LockEngine::ResumeAsk ask;
    ask.resource = resource;
    ask.token = token;
    ask.ttl_ms = ttl_ms;
    ask.confirm_first = confirm_first;
    engine_->Resume(session, std::move(ask), [rec](const std::variant<Grant, Failure>& r) {
      ++rec->calls;
      rec->result = r;
    });
    return rec;
  }
  // The key of `resource` holds `token` on the first `masters` masters (an earlier run's grant).
  void Left(const std::string& resource, const std::string& token, int masters) {
    for (int i = 0; i < masters; ++i) node(i).Put(Key(resource), token, 10'000);
  }
  const std::string token_ = std::string(40, 'c');
};

TEST_F(ResumeEngineTest, AQuorumHoldingTheTokenMakesItThisSessionsHold) {
  MakeEngine();
  Left("job", token_, 3);
  AcquireRecord* r = Resume(1, "job", token_, 30'000);
  EXPECT_EQ(r->calls, 0) << "the callback must never run inside Resume";
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  ASSERT_TRUE(r->granted()) << r->Describe();
  EXPECT_EQ(r->grant().token, token_);
  EXPECT_GT(r->grant().validity_ms, 10'000) << "the resume's ttl was set";
  for (const auto& n : nodes_) EXPECT_EQ(n->Count(Op::kExtend), 1u) << n->index();
  ASSERT_EQ(engine_->books().HeldBy(1).size(), 1u);
  EXPECT_EQ(stats_.resumes[ResumeOutcome::kResumed].Value(), 1);

  // Held here: another session waits behind it, and its release frees the lock for it.
  AcquireRecord* next = Acquire(2, "job", 1'000, 60'000);
  RunFor(50);
  EXPECT_EQ(next->calls, 0);
  ReleaseRecord* rel = Release(1, "job", token_);
  ASSERT_TRUE(RunUntil([&] { return rel->calls > 0 && next->calls > 0; }));
  EXPECT_FALSE(rel->failure);
  EXPECT_TRUE(next->granted()) << next->Describe();
}

// A release or extend by an unknown token guesses the kind: until the masters confirm the key,
// the resource is not entered here, so an acquire of another kind meanwhile is not refused.
TEST_F(ResumeEngineTest, AGuessedKindEntersNothingUntilTheMastersConfirmIt) {
  MakeEngine();
  AcquireRecord* stale = Resume(LeaseSessionOf(7), "job", token_, 10'000, true);
  EXPECT_EQ(engine_->books().Find("job"), nullptr) << "entered before any master answered";
  ASSERT_TRUE(RunUntil([stale] { return stale->calls > 0; }));
  EXPECT_TRUE(stale->failed(ErrorCode::kNotHeld)) << stale->Describe();
  EXPECT_EQ(engine_->books().Find("job"), nullptr);
  for (const auto& n : nodes_) {  // a lease is taken over by token, from any agent's value
    EXPECT_EQ(n->Count(scripts::KindScript::kTakeLease), 1u) << n->index();
  }

  Left("job", token_, 3);
  AcquireRecord* r = Resume(LeaseSessionOf(7), "job", token_, 10'000, true);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  ASSERT_TRUE(r->granted()) << r->Describe();
  EXPECT_EQ(engine_->books().HeldBy(LeaseSessionOf(7)).size(), 1u);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Count(scripts::KindScript::kTakeLease), 3u) << n->index();
  }
}

TEST_F(ResumeEngineTest, TooFewMastersHoldingItIsNotHeldAndTheTokenIsDeletedWhereLeft) {
  MakeEngine();
  Left("job", token_, 2);
  AcquireRecord* r = Resume(1, "job", token_);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  EXPECT_TRUE(r->failed(ErrorCode::kNotHeld)) << r->Describe();
  EXPECT_THAT(r->failure().message, ::testing::HasSubstr("cannot resume"));
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  ASSERT_TRUE(RunUntil([&] { return node(0).Count(Op::kDelete) > 0; }));
  EXPECT_EQ(stats_.resumes[ResumeOutcome::kNotHeld].Value(), 1);
  // Free here again: the next acquire is granted.
  AcquireRecord* a = Acquire(2, "job", 1'000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  EXPECT_TRUE(a->granted()) << a->Describe();
}

TEST_F(ResumeEngineTest, MastersThatDoNotAnswerLeaveItUndecidedAndUntouched) {
  MakeEngine();
  Left("job", token_, 5);
  for (int i = 2; i < 5; ++i) node(i).Fail();
  AcquireRecord* r = Resume(1, "job", token_);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  EXPECT_TRUE(r->failed(ErrorCode::kNoQuorum)) << r->Describe();
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  RunFor(50);
  for (const auto& n : nodes_) EXPECT_EQ(n->Count(Op::kDelete), 0u) << "left for another try";
  for (int i = 2; i < 5; ++i) node(i).Immediate();
  AcquireRecord* again = Resume(1, "job", token_);
  ASSERT_TRUE(RunUntil([again] { return again->calls > 0; }));
  EXPECT_TRUE(again->granted()) << again->Describe();
}

TEST_F(ResumeEngineTest, AHoldOfThisAgentIsNotResumedTwice) {
  MakeEngine();
  const std::string held = Hold(1, "job");
  AcquireRecord* same = Resume(1, "job", held);
  AcquireRecord* other = Resume(2, "job", held);
  ASSERT_TRUE(RunUntil([&] { return same->calls > 0 && other->calls > 0; }));
  EXPECT_TRUE(same->failed(ErrorCode::kBadRequest)) << same->Describe();
  EXPECT_TRUE(other->failed(ErrorCode::kBadRequest)) << other->Describe();
  for (const auto& n : nodes_) EXPECT_EQ(n->Count(Op::kExtend), 0u) << "refused before asking";
  EXPECT_EQ(stats_.resumes[ResumeOutcome::kFailed].Value(), 2);
}

// A leadership resumes with its term, and with the record the masters keep for that term (read
// before the hold is entered), so its views name its record and its resign drops it.
TEST_F(ResumeEngineTest, ALeadershipResumesWithItsTermAndItsRecord) {
  MakeEngine();
  const ElectionRecord mine{7, 1'000, R"({"value":"a"})"};
  for (int i = 0; i < 3; ++i) {
    node(i).Put(Key("lead"), token_, 10'000);
    node(i).Put(LeaderKey("lock:", "lead"), StoredRecord(token_, mine), 10'000);
  }
  auto resume = [&](std::optional<int64_t> term) {
    AcquireRecord* rec = &acquires_.emplace_back();
    LockEngine::ResumeAsk ask;
    ask.resource = "lead";
    ask.token = token_;
    ask.ttl_ms = 10'000;
    ask.renew = true;
    ask.fence = term;
    ask.kind.shape = LockShape{LockKind::kElection};
    engine_->Resume(1, std::move(ask), [rec](const std::variant<Grant, Failure>& r) {
      ++rec->calls;
      rec->result = r;
    });
    return rec;
  };
  AcquireRecord* no_term = resume(std::nullopt);
  ASSERT_TRUE(RunUntil([no_term] { return no_term->calls > 0; }));
  EXPECT_TRUE(no_term->failed(ErrorCode::kBadRequest)) << no_term->Describe();

  AcquireRecord* r = resume(7);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  ASSERT_TRUE(r->granted()) << r->Describe();
  EXPECT_EQ(r->grant().fence, 7);
  const auto views = engine_->books().AllLocks();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].kind, LockKind::kElection);
  ASSERT_TRUE(views[0].election.has_value()) << "the record was read from the masters";
  EXPECT_EQ(*views[0].election, mine);

  ReleaseRecord* rel = Release(1, "lead", token_);
  ASSERT_TRUE(RunUntil([rel] { return rel->calls > 0; }));
  ASSERT_TRUE(RunUntilQuiet());
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(node(i).Holder(LeaderKey("lock:", "lead")).has_value()) << "its record went too";
  }
}

}  // namespace
}  // namespace lw::engine_test
