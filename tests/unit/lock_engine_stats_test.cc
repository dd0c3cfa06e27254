// LockEngine: what it counts (EngineStats) and reports (EngineEvents).

#include <gtest/gtest.h>

#include <map>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

TEST_F(LockEngineTest, CountsOutcomesAttemptsHoldsAndSilentMasters) {
  MakeEngine(Options(/*node_timeout_ms=*/40));
  node(4).Hold();  // silent: it misses every deadline it is part of
  const std::string token = Hold(1, "res", 10'000);
  AcquireRecord* queued = Acquire(2, "res", 10'000, 30);  // times out behind session 1
  ASSERT_TRUE(RunUntil([queued] { return queued->calls > 0; }));
  EXPECT_EQ(stats_.acquire_wait[AcquireOutcome::kAcquired].Count(), 1u);
  EXPECT_EQ(stats_.acquire_wait[AcquireOutcome::kTimeout].Count(), 1u);
  EXPECT_EQ(stats_.acquire_attempts.Count(), 2u);
  ASSERT_EQ(events_.acquires.size(), 2u);
  EXPECT_EQ(events_.acquires[0], std::make_pair(AcquireOutcome::kAcquired, 1));
  EXPECT_EQ(events_.acquires[1], std::make_pair(AcquireOutcome::kTimeout, 0));
  ASSERT_EQ(events_.failed.size(), 1u);
  EXPECT_EQ(events_.failed[0], std::make_pair(SessionId{2}, ErrorCode::kTimeout));

  ReleaseRecord* r = Release(1, "res", token);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));  // waits for all: ends by deadline
  EXPECT_EQ(stats_.hold.Count(), 1u);
  EXPECT_GT(stats_.master_timeouts[4]->Value(), 0);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(stats_.master_timeouts[i]->Value(), 0) << "only the silent master misses deadlines";
  }

  for (int i = 0; i < 3; ++i) node(i).Fail();  // no quorum from now on
  AcquireRecord* failed = Acquire(3, "other", 10'000, 0);
  ASSERT_TRUE(RunUntil([failed] { return failed->calls > 0; }));
  EXPECT_EQ(stats_.acquire_wait[AcquireOutcome::kNoQuorum].Count(), 1u);
  EXPECT_EQ(events_.acquires.back(), std::make_pair(AcquireOutcome::kNoQuorum, 1));
}

TEST_F(LockEngineTest, CountsLocalHandOffsAndLostLocks) {
  MakeEngine(LocalFirst());
  const std::string t1 = Hold(1, "res", 10'000);
  AcquireRecord* next = Acquire(2, "res", 10'000, 5'000);
  Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([next] { return next->calls > 0; }));
  ASSERT_TRUE(next->granted()) << next->Describe();
  EXPECT_EQ(stats_.local_handoffs.Value(), 1);

  bool revoked = false;
  engine_->Revoke("res", [&](const std::optional<LockEngine::Revocation>&) { revoked = true; });
  ASSERT_TRUE(RunUntil([&] { return revoked; }));
  EXPECT_EQ(stats_.locks_lost[LossReason::kRevoked].Value(), 1);
  EXPECT_EQ(stats_.lost_failures.Value(), 1);
  ASSERT_EQ(lost_.size(), 1u);
  EXPECT_EQ(lost_[0].reason, "revoked");
  EXPECT_EQ(lost_[0].token, next->grant().token);
}

TEST_F(LockEngineTest, WithoutStatsOrEventsTheEngineCountsIntoItsOwn) {
  engine_ = std::make_unique<LockEngine>(&loop_, NodePtrs(), Options());
  AcquireRecord* a = Acquire(1, "res", 10'000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->granted()) << a->Describe();
  EXPECT_EQ(engine_->stats().acquire_wait[AcquireOutcome::kAcquired].Count(), 1u);
  EXPECT_EQ(stats_.acquire_wait[AcquireOutcome::kAcquired].Count(), 0u);
}

// The families and their help texts are those docs/metrics.md and the dashboards name.
TEST(EngineStats, DeclaresTheEngineFamiliesWithTheirLabels) {
  stats::Registry registry;
  EngineStats stats(registry, {"10.0.0.1:6379"});
  std::map<std::string, std::string> help;
  for (const auto& family : registry.Collect()) help[family.name] = family.help;
  EXPECT_EQ(help["lockwarden_acquire_wait_seconds"],
            "Time from an acquire request to its reply, by outcome.");
  EXPECT_EQ(help["lockwarden_locks_lost_total"], "Locks taken away from their holder, by reason.");
  EXPECT_EQ(help["lockwarden_master_errors_total"], "Master errors by kind.");
  for (const char* name :
       {"lockwarden_acquire_attempts", "lockwarden_lock_hold_seconds", "lockwarden_renewals_total",
        "lockwarden_local_handoffs_total", "lockwarden_fence_rounds_total",
        "lockwarden_failures_total", "lockwarden_release_wakeups_total"}) {
    EXPECT_EQ(help.count(name), 1u) << name;
  }
}

}  // namespace
}  // namespace lw::engine_test
