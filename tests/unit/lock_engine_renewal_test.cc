// LockEngine: extend and renewal (quorum within validity, renewal until lost, expiry).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

using ::testing::HasSubstr;

// 11.
TEST_F(LockEngineTest, ExtendCountsOnlyWithQuorum) {
  MakeEngine();
  // A 10 s lock extended to 30 s: it cannot expire during the test however slow the box, and
  // a validity above 10 s can only come from the extension.
  const std::string t1 = Hold(1, "res", 10000);
  ExtendRecord* e = Extend(1, "res", t1, 30000);
  EXPECT_EQ(e->calls, 0) << "the callback must never run inside Extend";
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }));
  ASSERT_TRUE(e->extended());
  const int64_t validity = std::get<Extension>(*e->result).validity_ms;
  EXPECT_GT(validity, 10000);
  EXPECT_LE(validity, 30000 - (300 + 2));
  for (const auto& n : nodes_) {
    const auto ext = n->Commands(Op::kExtend);
    ASSERT_EQ(ext.size(), 1u) << "node " << n->index();
    EXPECT_EQ(ext[0].key, Key("res"));
    EXPECT_EQ(ext[0].token, t1);
    EXPECT_EQ(ext[0].ttl_ms, 30000);
  }
  ASSERT_EQ(engine_->books().HeldBy(1).size(), 1u);
  EXPECT_GT(engine_->books().HeldBy(1)[0].validity_ms, 10000) << "the new validity applies";

  // Two confirmations are not enough, whether the other three fail (after the two yes
  // votes came in) or never answer at all.
  for (int i = 2; i < 5; ++i) node(i).Fail();
  ExtendRecord* e2 = Extend(1, "res", t1, 5000);
  ASSERT_TRUE(RunUntil([e2] { return e2->calls > 0; }));
  EXPECT_TRUE(e2->failed(ErrorCode::kNoQuorum));
  for (int i = 2; i < 5; ++i) node(i).Hold();
  ExtendRecord* e3 = Extend(1, "res", t1, 5000);
  ASSERT_TRUE(RunUntil([e3] { return e3->calls > 0; }));
  EXPECT_TRUE(e3->failed(ErrorCode::kNoQuorum));
  EXPECT_EQ(node(0).Count(Op::kExtend), 3u);
  ASSERT_EQ(engine_->books().HeldBy(1).size(), 1u) << "a failed extension does not drop the lock";
  EXPECT_EQ(engine_->books().HeldBy(1)[0].token, t1);
  for (const auto& n : nodes_) EXPECT_EQ(n->Count(Op::kDelete), 0u) << n->index();

  ExtendRecord* bad = Extend(1, "res", std::string(40, 'f'), 5000);
  ExtendRecord* other_session = Extend(2, "res", t1, 5000);
  ASSERT_TRUE(RunUntil([&] { return bad->calls > 0 && other_session->calls > 0; }));
  EXPECT_TRUE(bad->failed(ErrorCode::kNotHeld));
  EXPECT_TRUE(other_session->failed(ErrorCode::kNotHeld));
  EXPECT_EQ(node(0).Count(Op::kExtend), 3u) << "a refused extension sends nothing";
  EXPECT_TRUE(lost_.empty());
}

// 11b. HeldBy must agree with the validity the grant announced: ValidityMs() is the time
// left *from the moment the answers arrived* (ttl - elapsed - drift), so the lock is valid
// until then + validity, i.e. started + ttl - drift.

TEST_F(LockEngineTest, HeldByValidityAgreesWithTheGrant) {
  // The masters take 1 s to answer: subtracting that twice would cost a whole second, against
  // the few ms (or, on a loaded box, tens of ms) between the grant and the read below.
  constexpr int64_t kAnswerMs = 1000;
  MakeEngine(Options(/*node_timeout_ms=*/4000));
  for (auto& n : nodes_) n->Delay(kAnswerMs);
  std::optional<int64_t> held_at_grant;
  AcquireRecord* a = Acquire(1, "res", 10000, 0);
  ASSERT_TRUE(RunUntil(
      [&] {
        if (a->calls > 0 && !held_at_grant && !engine_->books().HeldBy(1).empty()) {
          held_at_grant = engine_->books().HeldBy(1)[0].validity_ms;
        }
        return a->calls > 0;
      },
      15000));
  ASSERT_TRUE(a->granted()) << a->Describe();
  ASSERT_TRUE(held_at_grant.has_value());
  const int64_t granted = a->grant().validity_ms;
  EXPECT_LE(granted, 10000 - kAnswerMs - 102);
  // Read within a loop turn of the grant.
  EXPECT_GE(*held_at_grant, granted - kAnswerMs / 2)
      << "HeldBy reports " << *held_at_grant << " ms left right after a grant of " << granted
      << " ms: the acquisition time was subtracted twice";
}

// 11c. An extension that reaches quorum while the lock is still valid (by the validity the
// grant announced) must succeed and must not drop the lock.
TEST_F(LockEngineTest, ExtendWithinTheGrantedValiditySucceeds) {
  // The masters take 1 s to answer. The extension is sent so that its answers arrive 500 ms
  // before the granted validity ends; a deadline that subtracted the acquisition's 1 s twice
  // would have passed 500 ms before they arrive. Both margins dwarf a loaded box's hiccups.
  constexpr int64_t kAnswerMs = 1000;
  MakeEngine(Options(/*node_timeout_ms=*/4000));
  for (auto& n : nodes_) n->Delay(kAnswerMs);
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, 15000));
  ASSERT_TRUE(a->granted()) << a->Describe();
  const int64_t validity = a->grant().validity_ms;  // about 5000 - 1000 - 52
  const int64_t send_in = validity - kAnswerMs - kAnswerMs / 2 - MsBetween(a->at, Clock::now());
  RunFor(std::max<int64_t>(0, send_in));
  ExtendRecord* e = Extend(1, "res", a->grant().token, 5000);
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }, 15000));
  EXPECT_LT(MsBetween(a->at, Clock::now()), validity) << "answered before the validity ended";
  for (const auto& n : nodes_) {
    const auto ext = n->Commands(Op::kExtend);
    ASSERT_EQ(ext.size(), 1u);
    ASSERT_TRUE(ext[0].reply.has_value());
  }
  EXPECT_TRUE(e->extended()) << (e->result && std::holds_alternative<Failure>(*e->result)
                                     ? std::get<Failure>(*e->result).message
                                     : std::string("?"));
  EXPECT_EQ(engine_->books().HeldBy(1).size(), 1u) << "the lock was dropped";
  EXPECT_EQ(node(0).Count(Op::kDelete), 0u);
}

// 12.
TEST_F(LockEngineTest, RenewedLockIsExtendedUntilMastersStopThenReportedLost) {
  // A 1.5 s ttl renewed every 500 ms: each renewal has a second to be answered (by masters that
  // answer on the next loop turn) before the lock would be lost.
  constexpr int64_t kTtlMs = 1500;
  MakeEngine(Options(/*node_timeout_ms=*/50, /*retry_delay_ms=*/20, /*retry_jitter_ms=*/10));
  AcquireRecord* a = Acquire(1, "res", kTtlMs, 0, /*renew=*/true);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->granted()) << a->Describe();
  const std::string token = a->grant().token;

  RunFor(2 * kTtlMs);
  EXPECT_TRUE(lost_.empty()) << "a renewed lock is not lost while masters answer";
  const auto ext = node(0).Commands(Op::kExtend);
  EXPECT_GE(ext.size(), 3u);
  for (const auto& c : ext) {
    EXPECT_EQ(c.token, token);
    EXPECT_EQ(c.ttl_ms, kTtlMs);
  }
  ASSERT_EQ(engine_->books().HeldBy(1).size(), 1u);
  EXPECT_TRUE(engine_->books().HeldBy(1)[0].renew);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Holder(Key("res")), token) << "kept alive on master " << n->index();
  }

  for (int i = 0; i < 3; ++i) node(i).Hold();
  const auto stopped = Clock::now();
  ASSERT_TRUE(RunUntil([this] { return !lost_.empty(); }, 10 * kTtlMs));
  const LostEvent lost = lost_[0];
  EXPECT_EQ(lost.session, 1u);
  EXPECT_EQ(lost.resource, "res");
  EXPECT_EQ(lost.token, token);
  EXPECT_EQ(lost.reason, "renew_failed");

  // The last renewal that won: node 0's last extension answered with 1.
  std::optional<Clock::time_point> last_ok;
  for (const auto& c : node(0).Commands(Op::kExtend)) {
    if (c.reply && c.reply->kind == Reply::Kind::kInteger && c.reply->integer == 1) {
      last_ok = c.sent;
    }
  }
  ASSERT_TRUE(last_ok.has_value());
  EXPECT_LE(*last_ok, stopped);
  // Lost when the validity of the last renewal that won (ttl - drift from its start) ran out:
  // not while it was clearly still valid, and not a whole ttl later.
  const int64_t after_ok = MsBetween(*last_ok, lost.at);
  EXPECT_GE(after_ok, kTtlMs * 2 / 3) << "declared lost while clearly still valid";
  EXPECT_LT(after_ok, 2 * kTtlMs) << "lost long after the validity ran out";

  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 0u);
  RunFor(100);
  EXPECT_EQ(lost_.size(), 1u) << "a loss is reported once";
}

// 13.
TEST_F(LockEngineTest, NonRenewedLockExpiresAndTheNextWaiterGetsIt) {
  MakeEngine();
  constexpr int64_t kTtlMs = 500;
  const auto start = Clock::now();
  AcquireRecord* a1 = Acquire(1, "res", kTtlMs, 0);
  ASSERT_TRUE(RunUntil([a1] { return a1->calls > 0; }));
  ASSERT_TRUE(a1->granted()) << a1->Describe();
  const int64_t validity = a1->grant().validity_ms;
  // Waits up to 30 s: had the loss not been declared at the validity's end, the waiter would
  // still be waiting.
  AcquireRecord* a2 = Acquire(2, "res", 10000, 30000);

  ASSERT_TRUE(RunUntil([this] { return !lost_.empty(); }, 20000));
  const LostEvent lost = lost_[0];
  EXPECT_EQ(lost.session, 1u);
  EXPECT_EQ(lost.resource, "res");
  EXPECT_EQ(lost.token, a1->grant().token);
  EXPECT_EQ(lost.reason, "expired");
  EXPECT_GE(MsBetween(start, lost.at), validity - 1) << "not before the validity ran out";
  EXPECT_LT(MsBetween(start, lost.at), validity + 2 * kTtlMs) << "long after the validity";
  EXPECT_TRUE(engine_->books().HeldBy(1).empty());
  EXPECT_EQ(node(0).Count(Op::kExtend), 0u) << "a lock without renew is never extended";

  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  for (const auto& n : nodes_) {
    const auto sets = n->Commands(Op::kSet);
    ASSERT_GE(sets.size(), 2u);
    EXPECT_EQ(sets.back().token, a2->grant().token);
    for (size_t i = 1; i < sets.size(); ++i) {
      EXPECT_GE(sets[i].sent, lost.at) << "the waiter contended only once the lock was lost";
    }
    // The lost lock's key is left to expire (one drift allowance after its validity), so a
    // client counting its validity from the reply's arrival keeps that margin.
    for (const auto& del : n->Commands(Op::kDelete)) EXPECT_NE(del.token, a1->grant().token);
  }
  ASSERT_EQ(engine_->books().HeldBy(2).size(), 1u);
  EXPECT_EQ(lost_.size(), 1u);
}
TEST_F(LockEngineTest, QuarantinedMastersDoNotCountTowardExtendQuorum) {
  MakeEngine();
  const std::string token = Hold(1, "res");
  for (int i = 0; i < 3; ++i) nodes_[i]->Quarantine(true);
  ExtendRecord* e = Extend(1, "res", token, 5000);
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }));
  ASSERT_TRUE(e->failed(ErrorCode::kNoQuorum));
  EXPECT_THAT(std::get<Failure>(*e->result).message, HasSubstr("3 master(s) are in restart quarantine"));
  EXPECT_EQ(engine_->books().HeldBy(1).size(), 1u) << "still valid: the lock is kept";
}

}  // namespace
}  // namespace lw::engine_test
