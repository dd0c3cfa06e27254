// Unit tests for src/core: Redlock arithmetic, resource names, tokens, durations, error codes.

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/closest_name.h"
#include "core/duration.h"
#include "core/error_code.h"
#include "core/redlock_math.h"
#include "core/resource_name.h"
#include "core/token.h"

namespace lw {
namespace {

// ---- redlock_math.h -------------------------------------------------------------------------

TEST(QuorumSizeTest, IsAStrictMajorityForOneToSevenMasters) {
  EXPECT_EQ(QuorumSize(1), 1);
  EXPECT_EQ(QuorumSize(2), 2);
  EXPECT_EQ(QuorumSize(3), 2);
  EXPECT_EQ(QuorumSize(4), 3);
  EXPECT_EQ(QuorumSize(5), 3);
  EXPECT_EQ(QuorumSize(6), 4);
  EXPECT_EQ(QuorumSize(7), 4);
  for (int n = 1; n <= 7; ++n) {
    EXPECT_GT(2 * QuorumSize(n), n) << n;        // a majority...
    EXPECT_LE(2 * (QuorumSize(n) - 1), n) << n;  // ...and the smallest one
  }
}

TEST(DriftAllowanceTest, IsTtlTimesDriftRoundedUpPlusTwoMs) {
  EXPECT_EQ(DriftAllowanceMs(30'000, 0.01), 302);
  EXPECT_EQ(DriftAllowanceMs(10'000, 0.01), 102);
  EXPECT_EQ(DriftAllowanceMs(100, 0.01), 3);
  EXPECT_EQ(DriftAllowanceMs(150, 0.01), 4);  // 1.5 rounds up to 2
  EXPECT_EQ(DriftAllowanceMs(1, 0.01), 3);    // 0.01 rounds up to 1
  EXPECT_EQ(DriftAllowanceMs(0, 0.01), 2);
  EXPECT_EQ(DriftAllowanceMs(30'000, 0.0), 2);
}

TEST(ValidityTest, SubtractsElapsedAndDrift) {
  EXPECT_EQ(ValidityMs(30'000, 0, 0.01), 29'698);
  EXPECT_EQ(ValidityMs(10'000, 50, 0.01), 9'848);
  EXPECT_EQ(ValidityMs(30'000, 1'000, 0.0), 28'998);
}

TEST(ValidityTest, MayBeZeroOrNegativeWhenTheRoundTookTooLong) {
  EXPECT_EQ(ValidityMs(100, 97, 0.01), 0);
  EXPECT_EQ(ValidityMs(100, 98, 0.01), -1);
  EXPECT_LT(ValidityMs(1'000, 5'000, 0.01), 0);
}

TEST(RetryDelayTest, IsBasePlusShareOfJitter) {
  EXPECT_EQ(RetryDelayMs(50, 50, 0.0), 50);
  EXPECT_EQ(RetryDelayMs(50, 50, 0.5), 75);
  EXPECT_EQ(RetryDelayMs(50, 0, 0.7), 50);
}

TEST(RetryDelayTest, StaysWithinBaseAndBasePlusJitter) {
  for (int i = 0; i < 1000; ++i) {
    const double r = i / 1000.0;
    const int64_t delay = RetryDelayMs(50, 50, r);
    EXPECT_GE(delay, 50) << r;
    EXPECT_LT(delay, 100) << r;
  }
}

TEST(RetryDelayTest, ClampsOutOfRangeRandomness) {
  EXPECT_EQ(RetryDelayMs(50, 50, -1.0), 50);
  EXPECT_LT(RetryDelayMs(50, 50, 1.0), 100);
  EXPECT_GE(RetryDelayMs(50, 50, 1.0), 99);
  EXPECT_LT(RetryDelayMs(50, 50, 7.0), 100);
}

TEST(VoteTallyTest, StartsUndecidedWithEveryoneOutstanding) {
  const VoteTally tally(5, 3);
  EXPECT_FALSE(tally.Decided());
  EXPECT_FALSE(tally.Won());
  EXPECT_FALSE(tally.Lost());
  EXPECT_FALSE(tally.AllIn());
  EXPECT_EQ(tally.outstanding(), 5);
  EXPECT_EQ(tally.answered(), 0);
}

TEST(VoteTallyTest, IsWonAtQuorumWithoutWaitingForTheRest) {
  VoteTally tally(5, 3);
  tally.Yes();
  tally.No();
  tally.Yes();
  EXPECT_FALSE(tally.Decided());
  tally.Yes();
  EXPECT_TRUE(tally.Won());
  EXPECT_FALSE(tally.Lost());
  EXPECT_TRUE(tally.Decided());
  EXPECT_FALSE(tally.AllIn());
  EXPECT_EQ(tally.outstanding(), 1);
  EXPECT_EQ(tally.answered(), 4);
  EXPECT_EQ(tally.yes(), 3);
  EXPECT_EQ(tally.no(), 1);
}

TEST(VoteTallyTest, IsLostAsSoonAsQuorumBecomesImpossible) {
  VoteTally tally(5, 3);
  tally.No();
  tally.Failed();
  EXPECT_FALSE(tally.Decided());  // 3 outstanding could still make quorum
  tally.No();
  EXPECT_TRUE(tally.Lost());
  EXPECT_FALSE(tally.Won());
  EXPECT_TRUE(tally.Decided());
  EXPECT_EQ(tally.outstanding(), 2);
}

TEST(VoteTallyTest, FailuresCountAgainstQuorumButAreNotAnswers) {
  VoteTally tally(3, 2);
  tally.Yes();
  tally.Failed();
  EXPECT_FALSE(tally.Decided());
  EXPECT_EQ(tally.answered(), 1);
  EXPECT_EQ(tally.failed(), 1);
  tally.Failed();
  EXPECT_TRUE(tally.Lost());
  EXPECT_TRUE(tally.AllIn());
}

TEST(VoteTallyTest, QuarantinedVotesAreRecordedButDoNotCountTowardQuorum) {
  VoteTally tally(5, 3, /*needed=*/0, /*n_counting=*/3);  // two masters in quarantine
  tally.Yes(/*counts=*/false);
  tally.Yes(/*counts=*/false);
  tally.Yes();
  tally.Yes();
  EXPECT_FALSE(tally.Decided()) << "4 yes, but only 2 that count";
  EXPECT_EQ(tally.yes(), 4);
  EXPECT_EQ(tally.counting_yes(), 2);
  EXPECT_EQ(tally.quarantined_yes(), 2);
  EXPECT_EQ(tally.not_counting(), 2);
  tally.No();
  EXPECT_TRUE(tally.Lost()) << "no counting master is left to reach 3";
  EXPECT_FALSE(tally.Won());
}

TEST(VoteTallyTest, NeedsBothTheQuorumAndTheFenceQuorum) {
  VoteTally tally(5, 3, /*needed=*/4, /*n_counting=*/4);  // one master in quarantine
  tally.Yes();
  tally.Yes();
  tally.Yes();
  EXPECT_FALSE(tally.Won()) << "quorum met, but a fenced grant needs 4";
  tally.Yes(/*counts=*/false);
  EXPECT_TRUE(tally.Won()) << "a quarantined master counts toward the fence quorum";
  VoteTally short_of_fence(5, 3, 4);
  short_of_fence.Yes();
  short_of_fence.Failed();
  short_of_fence.No();
  EXPECT_TRUE(short_of_fence.Lost()) << "at most 3 yes are possible, 4 are needed";
  EXPECT_EQ(VoteTally(5, 3, 1).needed(), 3) << "never below the quorum";
}

TEST(FenceQuorumSizeTest, SurvivesAMinorityLosingItsData) {
  const int expected[] = {0, 1, 2, 3, 3, 4, 5, 6, 6, 7};
  for (int n = 1; n <= 9; ++n) {
    EXPECT_EQ(FenceQuorumSize(n), expected[n]) << n;
    // A write set and a read set of this size share a master with any majority that kept data.
    const int f = FenceQuorumSize(n);
    EXPECT_GE(f + f + QuorumSize(n) - 2 * n, 1) << n;
    EXPECT_GE(f, QuorumSize(n));
    EXPECT_LE(f, n);
  }
}

TEST(VoteTallyTest, SingleMaster) {
  VoteTally won(1, 1);
  won.Yes();
  EXPECT_TRUE(won.Won());
  EXPECT_TRUE(won.AllIn());
  VoteTally lost(1, 1);
  lost.No();
  EXPECT_TRUE(lost.Lost());
}

TEST(VoteTallyTest, AllInWhenEveryMasterReported) {
  VoteTally tally(3, 2);
  tally.Yes();
  tally.No();
  tally.Yes();
  EXPECT_TRUE(tally.AllIn());
  EXPECT_TRUE(tally.Won());
  EXPECT_EQ(tally.outstanding(), 0);
}

// ---- resource_name.h ------------------------------------------------------------------------

TEST(ResourceNameTest, AcceptsOrdinaryAndUnicodeNames) {
  EXPECT_EQ(ResourceNameProblem("a"), std::nullopt);
  EXPECT_EQ(ResourceNameProblem("db/migrations:prod"), std::nullopt);
  EXPECT_EQ(ResourceNameProblem("with space and \"quotes\" \\ slash"), std::nullopt);
  EXPECT_EQ(ResourceNameProblem("ключ-é-日本-🔒"), std::nullopt);
  EXPECT_EQ(ResourceNameProblem("\xc2\xa0"), std::nullopt);  // U+00A0 is not a control char
}

TEST(ResourceNameTest, LengthLimitIsInBytes) {
  EXPECT_EQ(ResourceNameProblem(std::string(256, 'x')), std::nullopt);
  std::string emoji;
  for (int i = 0; i < 64; ++i) emoji += "🔒";  // 4 bytes each: exactly 256
  EXPECT_EQ(ResourceNameProblem(emoji), std::nullopt);
  const auto problem = ResourceNameProblem(std::string(257, 'x'));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("257"), std::string::npos);
  EXPECT_NE(problem->find("256"), std::string::npos);
  EXPECT_TRUE(ResourceNameProblem(emoji + "x").has_value());
}

TEST(ResourceNameTest, RefusesEmpty) {
  const auto problem = ResourceNameProblem("");
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("empty"), std::string::npos);
}

TEST(ResourceNameTest, RefusesControlCharacters) {
  for (const std::string& name :
       {std::string("a\0b", 3), std::string("a\tb"), std::string("a\nb"), std::string("\x1f"),
        std::string("a\x7f"), std::string("a\xc2\x85"), std::string("\xc2\x9f")}) {
    const auto problem = ResourceNameProblem(name);
    ASSERT_TRUE(problem.has_value()) << name;
    EXPECT_NE(problem->find("control"), std::string::npos) << *problem;
  }
}

TEST(ResourceNameTest, RefusesInvalidUtf8) {
  for (const std::string& name : {
           std::string("\xff"),              // never valid
           std::string("a\xc3"),             // truncated sequence
           std::string("\xc3(x"),            // bad continuation byte
           std::string("\xc0\xaf"),          // overlong '/'
           std::string("\xe0\x80\xaf"),      // overlong, 3 bytes
           std::string("\xed\xa0\x80"),      // UTF-16 surrogate
           std::string("\xf4\x90\x80\x80"),  // beyond U+10FFFF
           std::string("\x80"),              // lone continuation byte
       }) {
    const auto problem = ResourceNameProblem(name);
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("UTF-8"), std::string::npos) << *problem;
  }
}

// ---- token.h --------------------------------------------------------------------------------

TEST(TokenTest, NewTokenIsFortyLowercaseHex) {
  const std::string token = NewToken();
  ASSERT_EQ(token.size(), 40u);
  for (const char c : token) {
    EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << token;
  }
  EXPECT_TRUE(IsWellFormedToken(token));
}

TEST(TokenTest, NewTokensDiffer) {
  EXPECT_NE(NewToken(), NewToken());
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(NewToken());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(TokenTest, WellFormedMeansFortyLowercaseHex) {
  EXPECT_TRUE(IsWellFormedToken(std::string(40, '0')));
  EXPECT_TRUE(IsWellFormedToken("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(IsWellFormedToken(""));
  EXPECT_FALSE(IsWellFormedToken(std::string(39, 'a')));
  EXPECT_FALSE(IsWellFormedToken(std::string(41, 'a')));
  EXPECT_FALSE(IsWellFormedToken("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(IsWellFormedToken("0123456789abcdeg0123456789abcdef01234567"));
  EXPECT_FALSE(IsWellFormedToken("0123456789abcdef0123456789abcdef0123456 "));
  EXPECT_FALSE(IsWellFormedToken(std::string(39, 'a') + '\0'));
}

// ---- duration.h -----------------------------------------------------------------------------

int64_t Ms(std::string_view text) {
  const auto result = ParseDurationMs(text);
  if (const auto* error = std::get_if<std::string>(&result)) {
    ADD_FAILURE() << text << ": " << *error;
    return -1;
  }
  return std::get<int64_t>(result);
}

std::string DurationError(std::string_view text) {
  const auto result = ParseDurationMs(text);
  if (std::holds_alternative<int64_t>(result)) {
    ADD_FAILURE() << text << " parsed as " << std::get<int64_t>(result);
    return "";
  }
  return std::get<std::string>(result);
}

TEST(DurationTest, ParsesEachUnit) {
  EXPECT_EQ(Ms("250ms"), 250);
  EXPECT_EQ(Ms("30s"), 30'000);
  EXPECT_EQ(Ms("2m"), 120'000);
  EXPECT_EQ(Ms("1h"), 3'600'000);
  EXPECT_EQ(Ms("0s"), 0);
}

TEST(DurationTest, ParsesFractions) {
  EXPECT_EQ(Ms("1.5s"), 1'500);
  EXPECT_EQ(Ms("0.5m"), 30'000);
  EXPECT_EQ(Ms("0.25h"), 900'000);
}

TEST(DurationTest, RefusesBareNumberAndAsksForAUnit) {
  const std::string error = DurationError("30");
  EXPECT_NE(error.find("unit"), std::string::npos) << error;
  EXPECT_NE(error.find("\"30\""), std::string::npos) << error;
}

TEST(DurationTest, RefusesUnknownUnit) {
  const std::string error = DurationError("10x");
  EXPECT_NE(error.find("unknown unit \"x\""), std::string::npos) << error;
  EXPECT_FALSE(DurationError("10 s").empty());
  EXPECT_FALSE(DurationError("10S").empty());
  EXPECT_FALSE(DurationError("10sec").empty());
}

TEST(DurationTest, RefusesEmptyAndUnitOnly) {
  EXPECT_NE(DurationError("").find("must start with a number"), std::string::npos);
  EXPECT_NE(DurationError("s").find("must start with a number"), std::string::npos);
  EXPECT_NE(DurationError("ms").find("must start with a number"), std::string::npos);
  EXPECT_FALSE(DurationError("-5s").empty());
}

TEST(DurationTest, RefusesMalformedAndHugeNumbers) {
  EXPECT_NE(DurationError("1.2.3s").find("not a number"), std::string::npos);
  EXPECT_NE(DurationError("99999999999999999h").find("too large"), std::string::npos);
}

// ---- error_code.h ---------------------------------------------------------------------------

TEST(ErrorCodeTest, NamesRoundTrip) {
  const std::pair<ErrorCode, std::string_view> expected[] = {
      {ErrorCode::kBadRequest, "bad_request"},     {ErrorCode::kTimeout, "timeout"},
      {ErrorCode::kNoQuorum, "no_quorum"},         {ErrorCode::kNotHeld, "not_held"},
      {ErrorCode::kTooMany, "too_many"},           {ErrorCode::kForbidden, "forbidden"},
      {ErrorCode::kShuttingDown, "shutting_down"}, {ErrorCode::kInternal, "internal"},
  };
  for (const auto& [code, name] : expected) {
    EXPECT_EQ(ErrorCodeName(code), name);
    EXPECT_EQ(ErrorCodeFromName(name), code);
  }
  EXPECT_EQ(ErrorCodeFromName("nope"), std::nullopt);
  EXPECT_EQ(ErrorCodeFromName("BAD_REQUEST"), std::nullopt);
}

// ---- closest_name.h -------------------------------------------------------------------------

TEST(ClosestNameTest, SuggestsATypoOrAPrefixAndNothingFarther) {
  const std::vector<std::string_view> names = {"serve", "lock", "status", "scan"};
  EXPECT_EQ(ClosestName("stauts", names, 3), "status");
  EXPECT_EQ(ClosestName("stat", names, 1), "status");  // a prefix counts as one edit
  EXPECT_EQ(ClosestName("lokc", names, 2), "lock");
  EXPECT_EQ(ClosestName("xyz", names, 1), std::nullopt);
  EXPECT_EQ(ClosestName("lock", {}, 3), std::nullopt);
}

}  // namespace
}  // namespace lw

namespace lw {
namespace {

// Two units at most, rounded down to the last one shown, or up (FormatDurationMsUp).
TEST(FormatDurationMs, TwoUnitsAtMostRoundedDownOrUp) {
  const struct {
    int64_t ms;
    const char* down;
    const char* up;
  } cases[] = {
      {0, "0ms", "0ms"},           {850, "850ms", "850ms"},         {12'300, "12.3s", "12.3s"},
      {12'345, "12.3s", "12.4s"},  {59'950, "59.9s", "1m00s"},      {59'999, "59.9s", "1m00s"},
      {372'000, "6m12s", "6m12s"}, {372'001, "6m12s", "6m13s"},     {7'500'000, "2h05m", "2h05m"},
      {7'500'001, "2h05m", "2h06m"}, {273'600'000, "3d04h", "3d04h"}, {-1500, "-1.5s", "-1.5s"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FormatDurationMs(c.ms), c.down) << c.ms;
    EXPECT_EQ(FormatDurationMsUp(c.ms), c.up) << c.ms;
  }
  // A part rounded up beside the rest rounded down adds up to a whole of their unit.
  EXPECT_EQ(FormatDurationMs(15'000 - 12'655), "2.3s");
  EXPECT_EQ(FormatDurationMsUp(12'655), "12.7s");
}

}  // namespace
}  // namespace lw
