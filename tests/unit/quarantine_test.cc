// Unit tests for src/core/quarantine.h: when a (re)started master's votes count again.

#include "core/quarantine.h"

#include <gtest/gtest.h>

namespace lw {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(100);
constexpr milliseconds kMaxTtl(60'000);

MasterSighting Seen(Clock::time_point at, int64_t uptime_s, std::string run_id) {
  return {at, uptime_s, std::move(run_id)};
}

TEST(QuarantineTest, FirstSightOfAYoungMasterIsQuarantinedUntilMaxTtlAfterItsStart) {
  // Uptime 4 s is floor(now) - floor(start): the real uptime is more than 3 s.
  const auto v = JudgeSighting(Seen(kT0, 4, "aaaa"), {}, kMaxTtl);
  EXPECT_FALSE(v.restarted);
  EXPECT_EQ(v.started_at, kT0 - seconds(3));
  ASSERT_TRUE(v.until.has_value());
  EXPECT_EQ(*v.until, kT0 - seconds(3) + kMaxTtl);
  EXPECT_EQ(v.reason, "started 3.0s ago; may have forgotten locks it held before a restart");
}

TEST(QuarantineTest, FirstSightOfAnOldMasterCountsAtOnce) {
  const auto v = JudgeSighting(Seen(kT0, 61, "aaaa"), {}, kMaxTtl);
  EXPECT_FALSE(v.until.has_value());
  EXPECT_EQ(v.reason, "");
  EXPECT_FALSE(JudgeSighting(Seen(kT0, 86'400, "aaaa"), {}, kMaxTtl).until.has_value());
}

TEST(QuarantineTest, UptimeIsTakenAsUpToOneSecondTooLarge) {
  // Started at 10.9 s, asked at 11.1 s: Redis says 11 - 10 = 1 s; the estimate must not say
  // it started before it did. Even uptime max_ttl/1000 s may be a real uptime under max_ttl.
  const auto v = JudgeSighting(Seen(kT0, 60, "aaaa"), {}, kMaxTtl);
  ASSERT_TRUE(v.until.has_value());
  EXPECT_EQ(*v.until, kT0 + seconds(1));
  const auto young = JudgeSighting(Seen(kT0, 1, "aaaa"), {}, kMaxTtl);
  EXPECT_EQ(young.started_at, kT0);
  EXPECT_EQ(young.reason, "started just now; may have forgotten locks it held before a restart");
}

// Uptime 0 says it started within the last second, not in the future: the quarantine is
// max_ttl from the answer, the length the log and `status` then count down (it was max_ttl +
// 1 s, "quarantined for 16.0s" with a 15 s max_ttl).
TEST(QuarantineTest, AStartIsNeverEstimatedAfterTheAnswer) {
  const auto v = JudgeSighting(Seen(kT0, 0, "aaaa"), {}, kMaxTtl);
  EXPECT_EQ(v.started_at, kT0);
  ASSERT_TRUE(v.until.has_value());
  EXPECT_EQ(*v.until, kT0 + kMaxTtl);
}

// Redis's whole-second uptime (and its cached clock) makes each sighting's estimate of the same
// start land anywhere in a ~2 s band. Those do not move the end: the countdown logged when the
// quarantine began is the one `status` shows later.
TEST(QuarantineTest, SameRunIdWithinRoundingNoiseKeepsTheEnd) {
  const PreviousSighting before{"aaaa", kT0, kT0};  // seen with uptime 0 at kT0
  for (const auto& [after, uptime] : {std::pair{milliseconds(5'300), 5},
                                      std::pair{milliseconds(5'300), 4},
                                      std::pair{milliseconds(59'900), 59}}) {
    const auto v = JudgeSighting(Seen(kT0 + after, uptime, "aaaa"), before, kMaxTtl);
    EXPECT_FALSE(v.start_moved_later) << after.count() << " ms, uptime " << uptime;
    EXPECT_EQ(v.started_at, kT0);
    ASSERT_TRUE(v.until.has_value());
    EXPECT_EQ(*v.until, kT0 + kMaxTtl);
  }
}

TEST(QuarantineTest, SameRunIdKeepsTheLaterStartEstimate) {
  const PreviousSighting before{"aaaa", kT0 - seconds(3), kT0};
  // The wall clock was stepped forward: uptime jumps up. The earlier estimate is not taken.
  const auto forward = JudgeSighting(Seen(kT0 + seconds(5), 600, "aaaa"), before, kMaxTtl);
  EXPECT_FALSE(forward.restarted);
  EXPECT_EQ(forward.started_at, kT0 - seconds(3));
  ASSERT_TRUE(forward.until.has_value());
  EXPECT_EQ(*forward.until, kT0 - seconds(3) + kMaxTtl);
  // Stepped back: uptime shrinks, and the estimate moves later (longer quarantine).
  const auto back = JudgeSighting(Seen(kT0 + seconds(5), 2, "aaaa"), before, kMaxTtl);
  EXPECT_TRUE(back.start_moved_later);
  EXPECT_EQ(back.started_at, kT0 + seconds(4));
  EXPECT_EQ(*back.until, kT0 + seconds(4) + kMaxTtl);
}

TEST(QuarantineTest, NewRunIdStartsNoEarlierThanTheOldOneWasLastSeenAlive) {
  const PreviousSighting before{"aaaa1111bbbb", kT0 - std::chrono::hours(5), kT0};
  // Uptime claims an hour (its wall clock jumped), but the old process answered at kT0.
  const auto v = JudgeSighting(Seen(kT0 + seconds(2), 3600, "cccc2222dddd"), before, kMaxTtl);
  EXPECT_TRUE(v.restarted);
  EXPECT_EQ(v.started_at, kT0);
  ASSERT_TRUE(v.until.has_value());
  EXPECT_EQ(*v.until, kT0 + kMaxTtl);
  EXPECT_EQ(v.reason,
            "restarted 2.0s ago (run_id aaaa1111 became cccc2222); may have forgotten the locks "
            "it held");
}

TEST(QuarantineTest, NewRunIdWithAPlausibleUptimeUsesTheUptime) {
  const PreviousSighting before{"aaaa", kT0 - std::chrono::hours(5), kT0};
  const auto v = JudgeSighting(Seen(kT0 + seconds(10), 5, "bbbb"), before, kMaxTtl);
  EXPECT_TRUE(v.restarted);
  EXPECT_EQ(v.started_at, kT0 + seconds(6));
  EXPECT_EQ(*v.until, kT0 + seconds(6) + kMaxTtl);
}

TEST(QuarantineTest, ARestartLongerAgoThanMaxTtlCountsAtOnce) {
  // The agent lost the master for longer than max_ttl: every lock it had has expired anyway.
  const PreviousSighting before{"aaaa", kT0 - std::chrono::hours(5), kT0};
  const auto v = JudgeSighting(Seen(kT0 + std::chrono::minutes(10), 300, "bbbb"), before, kMaxTtl);
  EXPECT_TRUE(v.restarted);
  EXPECT_FALSE(v.until.has_value());
}

TEST(QuarantineTest, AbsurdUptimesDoNotOverflow) {
  const auto v = JudgeSighting(Seen(kT0, INT64_MAX, "aaaa"), {}, kMaxTtl);
  EXPECT_FALSE(v.until.has_value());
  const auto negative = JudgeSighting(Seen(kT0, -5, "aaaa"), {}, kMaxTtl);
  EXPECT_EQ(negative.started_at, kT0);
  EXPECT_TRUE(negative.until.has_value());
}

TEST(QuarantineTest, UnknownStartQuarantinesForMaxTtlFromTheAnswer) {
  const auto v = UnknownStart(kT0, "INFO server failed (ERR unknown command)", kMaxTtl);
  ASSERT_TRUE(v.until.has_value());
  EXPECT_EQ(*v.until, kT0 + kMaxTtl);
  EXPECT_EQ(v.reason,
            "INFO server failed (ERR unknown command): when it started is unknown, so it counts "
            "only after max_ttl (1m00s)");
}

}  // namespace
}  // namespace lw
