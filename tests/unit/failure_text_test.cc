// failure_text, the hand-off decision and the renewal timing: pure functions, no loop.

#include "locking/failure_text.h"

#include <gtest/gtest.h>

#include "locking/handoff.h"
#include "locking/renewal.h"

namespace lw {
namespace {

AttemptHistory Tried(int attempts, const VoteTally& last) {
  AttemptHistory h;
  h.ttl_ms = 5000;
  h.wait_ms = 1000;
  h.attempts = attempts;
  h.last_tally = last;
  return h;
}

TEST(FailureText, NeverContendedIsATimeoutBehindALocalHolder) {
  AttemptHistory h;
  h.wait_ms = 250;
  const Failure f = AcquireFailure("res", h, 5);
  EXPECT_EQ(f.code, ErrorCode::kTimeout);
  EXPECT_EQ(f.message, "\"res\" was held by another session of this agent for all of wait_ms=250");
  EXPECT_EQ(QueuedTooLong("res", 250).message, f.message);
}

TEST(FailureText, HeldByAnotherOwnerIsATimeoutWithTheAttempts) {
  VoteTally t(5, 3);
  for (int i = 0; i < 5; ++i) t.No();
  const Failure f = AcquireFailure("res", Tried(4, t), 5);
  EXPECT_EQ(f.code, ErrorCode::kTimeout);
  EXPECT_EQ(f.message, "\"res\" stayed held by another owner for all of wait_ms=1000 (4 attempt(s))");
}

TEST(FailureText, AFencedAttemptRefusedBeforeEveryMasterAnsweredIsATimeoutToo) {
  VoteTally t(3, 2, /*needed=*/3);  // a fenced grant needs every master of three
  t.No();                           // one refusal decides: the round ends there
  EXPECT_EQ(AcquireFailure("res", Tried(2, t), 3).code, ErrorCode::kTimeout);
  VoteTally silent(3, 2, 3);
  silent.Yes();
  silent.Failed();
  EXPECT_EQ(AcquireFailure("res", Tried(2, silent), 3).code, ErrorCode::kNoQuorum)
      << "no refusal: masters did not answer";
}

TEST(FailureText, AQuorumTooSlowSaysToRaiseTheTtl) {
  VoteTally t(5, 3);
  for (int i = 0; i < 5; ++i) t.Yes();
  AttemptHistory h = Tried(1, t);
  h.last_too_slow = true;
  const Failure f = AcquireFailure("res", h, 5);
  EXPECT_EQ(f.code, ErrorCode::kNoQuorum);
  EXPECT_EQ(f.message, "a quorum of masters said yes, but too slowly: no validity was left of "
                       "ttl_ms=5000; raise ttl_ms or check master latency");
}

TEST(FailureText, MastersDownAreNamedAsDown) {
  VoteTally t(5, 3);
  for (int i = 0; i < 3; ++i) t.Failed();
  const Failure f = AcquireFailure("res", Tried(1, t), 5);
  EXPECT_EQ(f.code, ErrorCode::kNoQuorum);
  EXPECT_EQ(f.message,
            "only 0 of 5 masters answered in time (quorum is 3); 3 could not be asked or failed "
            "(down, unreachable or an error reply), which ended the round before the others "
            "answered; see `lockwarden status` for master health");
}

TEST(FailureText, TooManyQuarantinedMastersSaysWhy) {
  VoteTally t(5, 3, 0, /*n_counting=*/2);
  const Failure f = AcquireFailure("res", Tried(1, t), 5);
  EXPECT_EQ(f.code, ErrorCode::kNoQuorum);
  EXPECT_EQ(f.message,
            "3 of 5 masters are in restart quarantine (they started less than max_ttl_ms ago and "
            "may have forgotten locks), so only 2 can count toward quorum (3); see `lockwarden "
            "status` for when each counts again");
}

TEST(FailureText, AFenceNotConfirmedSaysHowManyStillHeldTheKey) {
  VoteTally t(5, 3, /*needed=*/4);
  for (int i = 0; i < 3; ++i) t.Yes();
  t.Failed();
  t.Failed();
  AttemptHistory h = Tried(1, t);
  h.fence = true;
  h.last_in_fence_phase = true;
  EXPECT_EQ(AcquireFailure("res", h, 5).message,
            "only 3 of 5 masters still held the key when its fence was written (quorum is 3; a "
            "fenced grant needs 4 of 5); see `lockwarden status` for master health");
}

TEST(FailureText, ExtendFailuresSayWhetherTheLockIsLost) {
  VoteTally t(5, 3);
  t.Yes();
  t.Yes();
  const Failure kept = ExtendFailure("res", t, 5, /*lost=*/false, 1200);
  EXPECT_EQ(kept.code, ErrorCode::kNoQuorum);
  EXPECT_EQ(kept.message, "only 2 of 5 masters confirmed the extension (quorum is 3); the lock "
                          "stays valid for 1200 ms");
  const Failure lost = ExtendFailure("res", t, 5, /*lost=*/true, 0);
  EXPECT_EQ(lost.code, ErrorCode::kNotHeld);
  EXPECT_EQ(lost.message, "\"res\" could not be extended before its validity ran out (2 of 5 "
                          "masters confirmed); the lock is lost");
}

TEST(FailureText, FixedTexts) {
  EXPECT_EQ(ValidityRanOutBeforeReply().code, ErrorCode::kNoQuorum);
  EXPECT_EQ(ValidityRanOutBeforeReply().message,
            "the lock was won but its validity ran out before the reply could be written; it was "
            "released");
  EXPECT_EQ(ShuttingDown(true).message, "the agent is shutting down; retry shortly");
  EXPECT_EQ(ShuttingDown(false).message, "the agent is shutting down");
  EXPECT_EQ(TooManyQueued(3).code, ErrorCode::kTooMany);
  EXPECT_EQ(ReleaseNotHeld("r").code, ErrorCode::kNotHeld);
}

HandOffCase Fits() {
  HandOffCase c;
  c.released_ttl_ms = 1000;
  c.left_ms = 800;
  c.next_waiting = true;
  c.next_ttl_ms = 1000;
  return c;
}

TEST(HandOff, GivenWhenTheKeyFitsTheNextWaiter) { EXPECT_TRUE(MayHandOff(Fits())); }

TEST(HandOff, NotGivenWhenAnythingMayChangeTheKeyOrItDoesNotFit) {
  auto with = [](auto change) {
    HandOffCase c = Fits();
    change(c);
    return MayHandOff(c);
  };
  EXPECT_FALSE(with([](HandOffCase& c) { c.engine_stopping = true; }));
  EXPECT_FALSE(with([](HandOffCase& c) { c.attempt_in_flight = true; }));
  EXPECT_FALSE(with([](HandOffCase& c) { c.released_fenced = true; }));
  EXPECT_FALSE(with([](HandOffCase& c) { c.released_extending = true; }));
  EXPECT_FALSE(with([](HandOffCase& c) { c.next_waiting = false; }));
  EXPECT_FALSE(with([](HandOffCase& c) { c.next_fenced = true; }));
  EXPECT_FALSE(with([](HandOffCase& c) { c.lease = true; })) << "a lease's key names its token";
  EXPECT_FALSE(with([](HandOffCase& c) { c.next_ttl_ms = 2000; }));
  EXPECT_FALSE(with([](HandOffCase& c) { c.left_ms = 499; }));
  EXPECT_TRUE(with([](HandOffCase& c) { c.left_ms = 500; }));
  EXPECT_FALSE(with([](HandOffCase& c) {
    c.released_ttl_ms = c.next_ttl_ms = 1;
    c.left_ms = 0;
  })) << "nothing left: never handed over";
}

TEST(HandOff, WhereHoldsTakeTurnsOnlyToAWaiterKnownToHaveComeFirst) {
  HandOffCase c = Fits();
  c.turns = true;
  c.next_first = false;  // a waiter on another agent may have come before it
  EXPECT_FALSE(MayHandOff(c));
  c.next_first = true;
  EXPECT_TRUE(MayHandOff(c));
  c.left_ms = 499;  // turns never loosen the other conditions
  EXPECT_FALSE(MayHandOff(c));
  c = Fits();
  c.next_first = false;  // without turns (local_first), the old rule alone
  EXPECT_TRUE(MayHandOff(c));
}

TEST(HandOff, AWaiterGoesFirstOnlyIfTheLastGrantHeardEveryoneWhoCameBeforeIt) {
  using std::chrono::milliseconds;
  const auto at = std::chrono::steady_clock::time_point() + std::chrono::hours(1);
  const auto later = at + milliseconds(200);  // past the 100 ms window
  auto first = [&](auto came, const OthersHeard& heard, auto now) {
    return MayGoBeforeOthers(came, heard, now, 100);
  };
  OthersHeard heard{true, -1, at};  // nobody waited elsewhere as of `at`
  EXPECT_TRUE(first(at - milliseconds(1), heard, later));
  EXPECT_FALSE(first(at, heard, later)) << "came with the round, window over: unknown";
  EXPECT_FALSE(first(at + milliseconds(5), heard, later)) << "came after, window over: unknown";
  EXPECT_TRUE(first(at + milliseconds(5), heard, at + milliseconds(99))) << "within the window";
  EXPECT_FALSE(first(at + milliseconds(5), heard, at + milliseconds(100)));
  heard.waited_ms = 100;  // someone elsewhere had waited 100 ms as of `at`
  EXPECT_TRUE(first(at - milliseconds(100), heard, later));
  EXPECT_TRUE(first(at - milliseconds(500), heard, later));
  EXPECT_FALSE(first(at - milliseconds(99), heard, later)) << "the other came first";
  EXPECT_FALSE(first(at + milliseconds(5), heard, at + milliseconds(6)))
      << "someone waits elsewhere: no window";
  heard.asked = false;  // the grant did not hear (an older agent's answer, or none asked)
  EXPECT_FALSE(first(at - milliseconds(500), heard, at));
}

// A hold taken over by an upgrade is renewed as a grant's would be (two thirds of its ttl left),
// at once when that is past: never left to lapse unrenewed at the end of its validity.
TEST(Renewal, AnAdoptedHoldIsRenewedWhenAGrantsWouldBeOrAtOnce) {
  EXPECT_EQ(AdoptedDelayMs(true, 3000, 2900), 900);
  EXPECT_EQ(AdoptedDelayMs(true, 3000, 2000), 0);
  EXPECT_EQ(AdoptedDelayMs(true, 3000, 500), 0);
  EXPECT_EQ(AdoptedDelayMs(false, 3000, 500), 500);
}

TEST(Renewal, TimingStaysWithinTheValidity) {
  EXPECT_EQ(RenewDelayMs(true, 3000, 2900), 1000);
  EXPECT_EQ(RenewDelayMs(true, 3000, 500), 500);
  EXPECT_EQ(RenewDelayMs(false, 3000, 2900), 2900);
  EXPECT_EQ(RenewRoundTimeoutMs(10'000, 50), 2000);
  EXPECT_EQ(RenewRoundTimeoutMs(60, 50), 50);
  for (double u : {0.0, 0.5, 0.99}) {
    const int64_t d = RenewRetryDelayMs(400, 50, 50, u);
    EXPECT_GE(d, 1);
    EXPECT_LE(d, 400);
  }
  EXPECT_EQ(HandOffDelayMs(true, 3000, 2500), 500);
  EXPECT_EQ(HandOffDelayMs(false, 3000, 2500), 2500);
}

}  // namespace
}  // namespace lw
