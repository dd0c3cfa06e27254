// core/leadership.h: who leads, from what each master answered to the record read, and what an
// observer is told after each reading (term order, `missed`).

#include "core/leadership.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace lw {
namespace {

using State = LeaderReading::State;

// One master's answer: a record ("<term>" US "<since>" US "<payload>"), no record, or none.
struct Answer {
  enum Kind { kRecord, kNil, kSilent } kind;
  std::string text;
};
Answer Rec(int64_t term, const std::string& payload = "{}") {
  return {Answer::kRecord, StoredRecord("", ElectionRecord{term, 1000 + term, payload}).substr(1)};
}
const Answer kNil{Answer::kNil, ""};
const Answer kSilent{Answer::kSilent, ""};

RecordAnswers Answers(const std::vector<Answer>& by_master, std::vector<bool> counts = {}) {
  RecordAnswers out;
  for (const Answer& a : by_master) {
    out.values.push_back(a.kind == Answer::kRecord ? std::optional<std::string>(a.text)
                                                   : std::nullopt);
    out.nil.push_back(a.kind == Answer::kNil);
  }
  out.counts = std::move(counts);
  return out;
}

TEST(DecideLeaderTest, ARecordOnAQuorumLeadsWithItsTermSinceAndPayload) {
  const auto r = DecideLeader(Answers({Rec(7, R"({"value":"a"})"), Rec(7, R"({"value":"a"})"),
                                       Rec(7, R"({"value":"a"})"), kNil, kSilent}),
                              3);
  ASSERT_EQ(r.state, State::kLeader);
  EXPECT_EQ(r.record.term, 7);
  EXPECT_EQ(r.record.since_ms, 1007);
  EXPECT_EQ(r.record.payload, R"({"value":"a"})");
  EXPECT_EQ(r.answered, 4);
  EXPECT_EQ(r.agreeing, 3);
}

TEST(DecideLeaderTest, ARecordOnFewerThanAQuorumIsNotALeader) {
  // An expiring hold, or an attempt whose phase 2 reached too few masters: every master
  // answered, and the record cannot reach 3 of 5.
  const auto r = DecideLeader(Answers({Rec(7), Rec(7), kNil, kNil, kNil}), 3);
  EXPECT_EQ(r.state, State::kNone);
  EXPECT_EQ(r.agreeing, 2);
}

TEST(DecideLeaderTest, NobodyLeadsWhenAQuorumAnsweredAndNoRecordCanReachOne) {
  EXPECT_EQ(DecideLeader(Answers({kNil, kNil, kNil}), 2).state, State::kNone);
  // Two masters silent, none of the three that answered has a record: 0 + 2 < 3.
  EXPECT_EQ(DecideLeader(Answers({kNil, kNil, kNil, kSilent, kSilent}), 3).state, State::kNone);
}

TEST(DecideLeaderTest, CannotTellWithFewerThanAQuorumOfAnswers) {
  const auto r = DecideLeader(Answers({kNil, kSilent, kSilent}), 2);
  EXPECT_EQ(r.state, State::kUnknown);
  EXPECT_EQ(r.answered, 1);
  EXPECT_EQ(DecideLeader(Answers({kSilent, kSilent, kSilent}), 2).state, State::kUnknown);
}

TEST(DecideLeaderTest, CannotTellWhenTheSilentMastersCouldMakeARecordAQuorum) {
  // 3 of 5 answered, one with a record: with both silent ones it would be on 3.
  EXPECT_EQ(DecideLeader(Answers({Rec(4), kNil, kNil, kSilent, kSilent}), 3).state,
            State::kUnknown);
  // With only one silent it could not: nobody leads.
  EXPECT_EQ(DecideLeader(Answers({Rec(4), kNil, kNil, kNil, kSilent}), 3).state, State::kNone);
}

TEST(DecideLeaderTest, RecordsOfTwoLeadersOnTheirWayInAndOutDecideByTheQuorum) {
  // The old leader still on two masters (its hold expiring), the new one on three.
  const auto r = DecideLeader(Answers({Rec(7), Rec(7), Rec(8), Rec(8), Rec(8)}), 3);
  ASSERT_EQ(r.state, State::kLeader);
  EXPECT_EQ(r.record.term, 8);
  // Two of each: neither is the leader, and the silent master could make either one.
  EXPECT_EQ(DecideLeader(Answers({Rec(7), Rec(7), Rec(8), Rec(8), kSilent}), 3).state,
            State::kUnknown);
}

TEST(DecideLeaderTest, MastersInRestartQuarantineDoNotCount) {
  // The quarantined masters' records (maybe a stale hold brought back) make no quorum.
  const auto r = DecideLeader(Answers({Rec(9), Rec(9), Rec(9), kNil, kNil},
                                      {false, false, true, true, true}),
                              3);
  EXPECT_EQ(r.state, State::kNone);
  EXPECT_EQ(r.answered, 3);
  // And they are not counted as silent either: 3 counting masters answered nil.
  EXPECT_EQ(DecideLeader(Answers({kSilent, kSilent, kNil, kNil, kNil},
                                 {false, false, true, true, true}),
                         3)
                .state,
            State::kNone);
}

TEST(DecideLeaderTest, AnUnreadableRecordNamesNobody) {
  const Answer junk{Answer::kRecord, "not a record"};
  EXPECT_EQ(DecideLeader(Answers({junk, junk, junk}), 2).state, State::kNone);
}

// ---- LeaderFeed -----------------------------------------------------------------------------

LeaderReading Leader(int64_t term) {
  LeaderReading r;
  r.state = State::kLeader;
  r.record = ElectionRecord{term, 1000 + term, "{}"};
  return r;
}
LeaderReading Nobody() {
  LeaderReading r;
  r.state = State::kNone;
  return r;
}
LeaderReading Unknown() { return LeaderReading{}; }

TEST(LeaderFeedTest, TellsEachNewLeaderAndNobodyInTermOrder) {
  LeaderFeed feed;
  feed.Start(Leader(7));
  EXPECT_FALSE(feed.Next(Leader(7))) << "no change, no event";
  auto gone = feed.Next(Nobody());
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->leader);
  EXPECT_EQ(gone->term, 7) << "nobody, after term 7";
  EXPECT_FALSE(gone->missed);
  EXPECT_FALSE(feed.Next(Nobody()));
  auto next = feed.Next(Leader(8));
  ASSERT_TRUE(next);
  ASSERT_TRUE(next->leader);
  EXPECT_EQ(next->leader->term, 8);
  EXPECT_EQ(next->term, 8);
  EXPECT_FALSE(next->missed);
  auto direct = feed.Next(Leader(9));
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->term, 9);
  EXPECT_FALSE(direct->missed) << "9 right after 8";
}

TEST(LeaderFeedTest, NeverGoesBackToALowerTerm) {
  LeaderFeed feed;
  feed.Start(Leader(8));
  EXPECT_FALSE(feed.Next(Leader(7)));
  ASSERT_TRUE(feed.Next(Nobody()));
  EXPECT_FALSE(feed.Next(Leader(7))) << "after 8 ended, 7 is older still";
  EXPECT_EQ(feed.term(), 8);
}

TEST(LeaderFeedTest, ATermThatJumpsSaysChangesMayHaveBeenMissed) {
  LeaderFeed feed;
  feed.Start(Leader(3));
  auto jump = feed.Next(Leader(5));
  ASSERT_TRUE(jump);
  EXPECT_TRUE(jump->missed) << "term 4 was never seen";
  auto next = feed.Next(Leader(6));
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->missed) << "missed is about the change it comes with";
}

TEST(LeaderFeedTest, StartingFromNobodyKnowsNoTermSoOnlyTermOneFollowsWithoutAGap) {
  LeaderFeed first;
  first.Start(Nobody());
  auto one = first.Next(Leader(1));
  ASSERT_TRUE(one);
  EXPECT_FALSE(one->missed);
  LeaderFeed later;
  later.Start(Nobody());
  auto twelve = later.Next(Leader(12));
  ASSERT_TRUE(twelve);
  EXPECT_TRUE(twelve->missed) << "leaders 1..11 may have come and gone since the reply";
}

TEST(LeaderFeedTest, AReadingThatCannotDecideMarksTheNextEventMissed) {
  LeaderFeed feed;
  feed.Start(Leader(4));
  EXPECT_FALSE(feed.Next(Unknown()));
  auto gone = feed.Next(Nobody());
  ASSERT_TRUE(gone);
  EXPECT_TRUE(gone->missed) << "a leader may have come and gone while it could not tell";
  EXPECT_EQ(gone->term, 4);
  auto next = feed.Next(Leader(5));
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->missed);
}

TEST(LeaderFeedTest, TheSameLeaderAfterAnInterruptionMissedNothing) {
  LeaderFeed feed;
  feed.Start(Leader(4));
  EXPECT_FALSE(feed.Next(Unknown()));
  EXPECT_FALSE(feed.Next(Leader(4))) << "term 4 still leads: nobody else led in between";
  auto next = feed.Next(Leader(5));
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->missed);
}

TEST(LeaderFeedTest, NobodyThroughAnInterruptionIsToldAtTheNextLeader) {
  LeaderFeed feed;
  feed.Start(Nobody());
  EXPECT_FALSE(feed.Next(Unknown()));
  EXPECT_FALSE(feed.Next(Nobody()));
  auto next = feed.Next(Leader(1));
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->missed) << "the interruption is remembered until an event carries it";
}

TEST(LeaderFeedTest, ALeaderToldGoneAndFoundAgainIsToldAgainAsMissed) {
  LeaderFeed feed;
  feed.Start(Leader(6));
  ASSERT_TRUE(feed.Next(Nobody()));
  auto again = feed.Next(Leader(6));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->term, 6);
  EXPECT_TRUE(again->missed);
  EXPECT_TRUE(feed.leading());
}

}  // namespace
}  // namespace lw
