#include "observe/recent.h"

#include <gtest/gtest.h>

namespace lw {
namespace {

Event At(int64_t ms, std::string kind, std::string message = "m") {
  Event e;
  e.at_unix_ms = ms;
  e.kind = std::move(kind);
  e.message = std::move(message);
  return e;
}

TEST(EventLogTest, NewestFirstAcrossBothRings) {
  EventLog log;
  log.Add(At(1000, "master_down"));
  log.AddNoisy(At(2000, "acquire_failed"), "a");
  log.Add(At(3000, "master_up"));
  const auto events = log.Recent();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, "master_up");
  EXPECT_EQ(events[1].kind, "acquire_failed");
  EXPECT_EQ(events[2].kind, "master_down");
}

TEST(EventLogTest, NoisyEventsNeverPushOutNotableOnes) {
  EventLog log;
  log.Add(At(1, "master_down"));
  for (int i = 0; i < 10'000; ++i) log.AddNoisy(At(2 + i, "acquire_failed"), std::to_string(i));
  const auto events = log.Recent();
  EXPECT_EQ(events.size(), 1 + EventLog::kNoisyCapacity);
  EXPECT_EQ(events.back().kind, "master_down");
}

TEST(EventLogTest, NotableRingIsBounded) {
  EventLog log;
  for (int i = 0; i < 1000; ++i) log.Add(At(i, "admin", std::to_string(i)));
  const auto events = log.Recent();
  ASSERT_EQ(events.size(), EventLog::kNotableCapacity);
  EXPECT_EQ(events.front().message, "999");
}

TEST(EventLogTest, IdenticalNoisyEventsCoalesceWithinAMinute) {
  EventLog log;
  log.AddNoisy(At(1000, "acquire_failed", "first"), "timeout orders");
  log.AddNoisy(At(5000, "acquire_failed", "second"), "timeout orders");
  log.AddNoisy(At(6000, "acquire_failed"), "timeout billing");
  auto events = log.Recent();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].count, 2);
  EXPECT_EQ(events[1].at_unix_ms, 5000);
  EXPECT_EQ(events[1].message, "second");
  // More than a minute after the last one: a new event.
  log.AddNoisy(At(5000 + EventLog::kCoalesceMs + 1, "acquire_failed"), "timeout orders");
  events = log.Recent();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].count, 1);
}

TEST(AcquireHistoryTest, BinsAreMonotonicAndBoundTheWait) {
  for (double w : {0.0, 0.005, 0.01, 0.011, 0.3, 1.0, 17.0, 999.0, 30'000.0}) {
    const size_t bin = AcquireHistory::BinOf(w);
    EXPECT_GE(AcquireHistory::BinUpperMs(bin), w) << w;
    if (bin > 0) {
      EXPECT_LT(AcquireHistory::BinUpperMs(bin - 1), w) << w;
    }
  }
  EXPECT_EQ(AcquireHistory::BinOf(1e12), AcquireHistory::kBins - 1);
}

TEST(AcquireHistoryTest, CountsOutcomesPerBucketAndFillsQuietBuckets) {
  AcquireHistory h;
  const int64_t t0 = 1'795'000'000'000;  // a multiple of 5 s
  h.Record(t0 + 100, AcquireOutcome::kAcquired, 1.0);
  h.Record(t0 + 200, AcquireOutcome::kTimeout, 500.0);
  h.Record(t0 + 10'000, AcquireOutcome::kAcquired, 2.0);
  const auto points = h.Points(t0 + 12'000);
  ASSERT_EQ(points.size(), AcquireHistory::kBuckets);
  const auto& last = points.back();
  EXPECT_EQ(last.t_unix_ms, t0 + 10'000);
  EXPECT_EQ(last.outcomes[0], 1u);
  const auto& quiet = points[points.size() - 2];
  EXPECT_EQ(quiet.outcomes[0] + quiet.outcomes[1], 0u);
  EXPECT_FALSE(quiet.wait_p99_ms.has_value());
  const auto& first = points[points.size() - 3];
  EXPECT_EQ(first.outcomes[static_cast<size_t>(AcquireOutcome::kAcquired)], 1u);
  EXPECT_EQ(first.outcomes[static_cast<size_t>(AcquireOutcome::kTimeout)], 1u);
  ASSERT_TRUE(first.wait_p99_ms.has_value());
  EXPECT_GE(*first.wait_p99_ms, 500.0);
  EXPECT_LT(*first.wait_p99_ms, 500.0 * 1.2);
}

TEST(AcquireHistoryTest, P99IgnoresTheFastestNinetyNinePercent) {
  AcquireHistory h;
  const int64_t t0 = 1'795'000'000'000;
  for (int i = 0; i < 990; ++i) h.Record(t0, AcquireOutcome::kAcquired, 0.2);
  for (int i = 0; i < 10; ++i) h.Record(t0, AcquireOutcome::kAcquired, 80.0);
  auto p99 = h.Points(t0).back().wait_p99_ms;
  ASSERT_TRUE(p99.has_value());
  EXPECT_LT(*p99, 0.25);  // 990 of 1000 are fast: the 99th percentile is fast
  h.Record(t0, AcquireOutcome::kAcquired, 80.0);
  p99 = h.Points(t0).back().wait_p99_ms;
  EXPECT_GE(*p99, 80.0);
}

TEST(AcquireHistoryTest, OldBucketsAreForgottenAfterFifteenMinutes) {
  AcquireHistory h;
  const int64_t t0 = 1'795'000'000'000;
  h.Record(t0, AcquireOutcome::kNoQuorum, 3.0);
  const int64_t later = t0 + AcquireHistory::kBucketMs * AcquireHistory::kBuckets;
  h.Record(later, AcquireOutcome::kAcquired, 1.0);  // reuses the same ring slot
  const auto points = h.Points(later);
  uint64_t no_quorum = 0;
  for (const auto& p : points) no_quorum += p.outcomes[static_cast<size_t>(AcquireOutcome::kNoQuorum)];
  EXPECT_EQ(no_quorum, 0u);
  EXPECT_EQ(points.front().t_unix_ms, later - AcquireHistory::kBucketMs * (AcquireHistory::kBuckets - 1));
  // Asking about a time long after: everything is zero, nothing stale shows.
  const auto far = h.Points(later + 3'600'000);
  for (const auto& p : far) EXPECT_EQ(p.outcomes[0], 0u);
}

}  // namespace
}  // namespace lw
