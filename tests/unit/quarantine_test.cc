// Unit tests for src/core/quarantine.h: when a (re)started master's votes count again.

#include "core/quarantine.h"

#include <gtest/gtest.h>

#include <string>

#include "core/duration.h"

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
  EXPECT_EQ(QuarantineReason(v, kT0),
            "started 3.0s ago, and counts once up 1m00s (max_ttl_ms): it may have forgotten "
            "locks it held before a restart");
}

TEST(QuarantineTest, FirstSightOfAnOldMasterCountsAtOnce) {
  const auto v = JudgeSighting(Seen(kT0, 61, "aaaa"), {}, kMaxTtl);
  EXPECT_FALSE(v.until.has_value());
  EXPECT_EQ(QuarantineReason(v, kT0), "");
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
  EXPECT_EQ(QuarantineReason(young, kT0),
            "started 0ms ago, and counts once up 1m00s (max_ttl_ms): it may have forgotten locks "
            "it held before a restart");
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
  EXPECT_EQ(QuarantineReason(v, kT0 + seconds(2)),
            "restarted 2.0s ago (run_id aaaa1111 became cccc2222), and counts once up 1m00s "
            "(max_ttl_ms): it may have forgotten the locks it held");
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
  EXPECT_EQ(QuarantineReason(v, kT0 + milliseconds(12'345)),
            "INFO server failed (ERR unknown command): when it started is unknown, so it counts "
            "1m00s (max_ttl_ms) after it was first seen, 12.4s ago");
}

// The reason is told as of when it is read, not frozen at the sighting that judged it: `status`
// prints "counts again in <left>: started <ago> ago", and left (CeilMs, printed rounded down)
// and ago (printed rounded up) add up to the quarantine's length as printed. It said "counts
// again in 2.3s: started 10.1s ago" of a 15 s quarantine: the ago of the last INFO answer.
TEST(QuarantineTest, TheReasonsTimeSinceTheStartAndTheTimeLeftAddUpToItsLength) {
  constexpr milliseconds kDemoMaxTtl(15'000);
  const auto v = JudgeSighting(Seen(kT0, 1, "aaaa"), {}, kDemoMaxTtl);  // started at kT0
  ASSERT_TRUE(v.until.has_value());
  for (const auto later : {milliseconds(0), milliseconds(2'650), milliseconds(12'655),
                           milliseconds(12'700), milliseconds(14'999)}) {
    const auto now = kT0 + later;
    const int64_t left =
        std::chrono::ceil<milliseconds>(*v.until - now).count();  // what `health` says is left
    const std::string reason = QuarantineReason(v, now);
    const std::string ago = reason.substr(8, reason.find(" ago") - 8);  // "started <ago> ago"
    const auto seconds_of = [](const std::string& shown) {  // "2.3s" or "850ms"
      return shown.ends_with("ms") ? std::stod(shown) / 1000 : std::stod(shown);
    };
    const double shown_left = seconds_of(FormatDurationMs(left));
    const double shown_ago = seconds_of(ago);
    // Exactly when both are printed in tenths of seconds; to the millisecond when one is in ms.
    const double unit = left < 1000 || ago.ends_with("ms") ? 0.001 : 0;
    EXPECT_NEAR(shown_left + shown_ago, 15.0, unit + 1e-9)
        << later.count() << " ms: " << reason << ", left " << FormatDurationMs(left);
    EXPECT_NE(reason.find("counts once up 15.0s (max_ttl_ms)"), std::string::npos) << reason;
  }
  EXPECT_EQ(QuarantineReason(v, kT0 + milliseconds(12'655)).substr(0, 20), "started 12.7s ago, a");
}

}  // namespace
}  // namespace lw
