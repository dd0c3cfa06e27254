// Turns (locking/turns.h): what an agent does to take turns with other agents, as pure logic:
// whether a hold takes turns, what an attempt's tally leaves queued, what a grant and a
// QueueHead read heard, when a local hand-off may go ahead of other agents, and which release
// round a hold sends. The scripts and the engine's use of them run against real agents and
// masters in tests/integration/turns_test.cc; the scripts' rounds in lock_kinds_test.cc.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "locking/kinds/kinds.h"
#include "locking/turns.h"
#include "redis/scripts.h"

namespace lw::turns_test {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

EngineOptions Options(bool local_first = false) {
  EngineOptions o;
  o.retry_delay_ms = 100;
  o.retry_jitter_ms = 50;
  o.node_timeout_ms = 200;
  o.value_prefix = "agent-a:";
  o.local_first = local_first;
  return o;
}

VoteTally Tally(int yes, int no, int failed) {
  VoteTally t(5, 3);
  for (int i = 0; i < yes; ++i) t.Yes();
  for (int i = 0; i < no; ++i) t.No();
  for (int i = 0; i < failed; ++i) t.Failed();
  return t;
}

RoundResult Result() { return {VoteTally(5, 3), Clock::now(), -1, 0, {}, {}, {}}; }

HoldPlace Place(const std::string& name) {
  static const std::string prefix = "lw:", fences = "lwf:";
  return HoldPlace{prefix, fences, name, LockShape{}, HoldMode::kExclusive, -1};
}

TEST(TurnRulesTest, HoldsTakeTurnsUnlessTheAgentServesItsOwnFirst) {
  const EngineOptions fair = Options(), local = Options(/*local_first=*/true);
  const Kind& mutex = KindOf(LockShape{});
  EXPECT_TRUE(Turns(fair).Take(mutex, HoldMode::kExclusive));
  EXPECT_TRUE(Turns(fair).Take(mutex, HoldMode::kShared));
  EXPECT_FALSE(Turns(local).Take(mutex, HoldMode::kExclusive));
}

TEST(TurnRulesTest, TheSignOfAWaiterLivesAFewRetriesAndNeverUnderASecond) {
  EngineOptions o = Options();
  EXPECT_EQ(Turns(o).WaitingTtlMs(), 1000) << "2 x (100 + 50 + 200) is under a second";
  o.retry_delay_ms = 400;
  EXPECT_EQ(Turns(o).WaitingTtlMs(), 2 * (400 + 50 + 200));
}

TEST(TurnRulesTest, AnAttemptAMasterRefusedOrDidNotAnswerMayHaveQueuedTheAgent) {
  TurnState granted_by_all, refused_by_one, unheard, lost;
  Turns::AttemptEnded(granted_by_all, Tally(5, 0, 0));
  Turns::AttemptEnded(refused_by_one, Tally(4, 1, 0));
  Turns::AttemptEnded(unheard, Tally(4, 0, 1));
  Turns::AttemptEnded(lost, Tally(2, 3, 0));
  EXPECT_FALSE(granted_by_all.queued);
  EXPECT_TRUE(refused_by_one.queued);
  EXPECT_TRUE(unheard.queued);
  EXPECT_TRUE(lost.queued);
}

TEST(TurnRulesTest, AGrantHearsOthersOnlyWhenItAskedAndEveryYesSaid) {
  RoundResult res = Result();
  res.others_waited_ms = 40;
  TurnState asked, not_asked, untold;
  Turns::GrantHeard(asked, /*asked=*/true, res);
  Turns::GrantHeard(not_asked, /*asked=*/false, res);
  res.others_untold = 1;
  Turns::GrantHeard(untold, /*asked=*/true, res);
  EXPECT_TRUE(asked.others.asked);
  EXPECT_EQ(asked.others.waited_ms, 40);
  EXPECT_EQ(asked.others.at, res.started);
  EXPECT_FALSE(not_asked.others.asked);
  EXPECT_FALSE(untold.others.asked);
}

TEST(TurnRulesTest, AQueueHeadReadHearsTheLongestWaitAndNothingWhenAMasterWasSilent) {
  RoundResult res = Result();
  res.values = {std::string("12"), std::nullopt, std::string("30"), std::string("junk")};
  res.read_nil = {false, true, false, false};
  TurnState s;
  s.asking = true;
  Turns::Heard(s, res);
  EXPECT_FALSE(s.asking);
  EXPECT_TRUE(s.others.asked);
  EXPECT_GT(s.others.waited_ms, 30) << "an unreadable answer reads as a long wait";

  res.values = {std::string("12"), std::nullopt, std::nullopt};
  res.read_nil = {false, true, false};  // the third did not answer
  Turns::Heard(s, res);
  EXPECT_FALSE(s.others.asked);
  EXPECT_EQ(s.others.waited_ms, 12);
}

TEST(TurnRulesTest, OneQuestionInFlightAndALeaveOnlyWhenQueued) {
  const EngineOptions o = Options();
  const Turns turns(o);
  TurnState s;
  const auto ask = turns.Ask(s, Place("r"));
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->script, scripts::KindScript::kQueueHead);
  EXPECT_FALSE(turns.Ask(s, Place("r")).has_value()) << "a second question while one is out";

  EXPECT_FALSE(turns.Leave(s, Place("r")).has_value()) << "not queued: nothing to leave";
  s.queued = true;
  const auto leave = turns.Leave(s, Place("r"));
  ASSERT_TRUE(leave.has_value());
  EXPECT_EQ(leave->script, scripts::KindScript::kLeaveQueue);
  EXPECT_FALSE(s.queued);
}

TEST(TurnRulesTest, AHandOffGoesAheadOnlyOfOthersItCameBefore) {
  const EngineOptions o = Options();
  const Turns turns(o);
  const Kind& mutex = KindOf(LockShape{});
  const auto now = Clock::now();
  TurnState s;
  HandOffCase c;

  // Nothing heard of other agents: it may not go ahead, and nothing is asked beside it.
  EXPECT_FALSE(turns.HandOff(s, mutex, HoldMode::kExclusive, now - milliseconds(5), now, c));
  EXPECT_TRUE(c.turns);
  EXPECT_FALSE(c.next_first);

  // Heard that nobody waited, long ago (beyond the window of 150 ms): hand over, and ask again.
  s.others = {true, -1, now - milliseconds(1000)};
  EXPECT_TRUE(turns.HandOff(s, mutex, HoldMode::kExclusive, now - milliseconds(5), now, c));
  EXPECT_TRUE(c.next_first);

  // Heard of a waiter elsewhere that had waited 50 ms at a round 100 ms ago: one that came
  // before it goes first, one that came after does not, and nothing is asked.
  s.others = {true, 50, now - milliseconds(100)};
  EXPECT_FALSE(turns.HandOff(s, mutex, HoldMode::kExclusive, now - milliseconds(200), now, c));
  EXPECT_TRUE(c.next_first);
  EXPECT_FALSE(turns.HandOff(s, mutex, HoldMode::kExclusive, now - milliseconds(20), now, c));
  EXPECT_FALSE(c.next_first);

  // An agent that serves its own first does not take turns at all.
  const EngineOptions local = Options(/*local_first=*/true);
  EXPECT_FALSE(Turns(local).HandOff(s, mutex, HoldMode::kExclusive, now, now, c));
  EXPECT_FALSE(c.turns);
}

TEST(TurnRulesTest, AReleaseInTurnSaysHowLongTheNextWaiterWaitedAndHowLongToReserve) {
  const EngineOptions o = Options();
  const Turns turns(o);
  const Kind& mutex = KindOf(LockShape{});
  const auto came = Clock::now() - milliseconds(250);
  const RoundRequest next =
      turns.Release(mutex, Place("r"), "tok", HoldMode::kExclusive, HoldMode::kExclusive, came);
  ASSERT_EQ(next.script, scripts::KindScript::kReleaseTurn);
  ASSERT_GE(next.args.size(), 3u);
  EXPECT_GE(std::stoll(next.args[1]), 250) << "the next waiter's wait";
  EXPECT_EQ(next.args[2], std::to_string(100 + 50 + 2 * 200)) << "the reservation";

  const RoundRequest alone =
      turns.Release(mutex, Place("r"), "tok", HoldMode::kExclusive, std::nullopt, came);
  ASSERT_EQ(alone.script, scripts::KindScript::kReleaseTurn);
  EXPECT_EQ(alone.args[1], "-1") << "no next waiter here";

  const EngineOptions local = Options(/*local_first=*/true);
  const RoundRequest plain =
      Turns(local).Release(mutex, Place("r"), "tok", HoldMode::kExclusive, std::nullopt, came);
  EXPECT_NE(plain.script, scripts::KindScript::kReleaseTurn);
}

}  // namespace lw::turns_test
