// Each lock kind as the engine asks it (locking/kinds/kind.h): which part an acquire takes, who
// may contend beside what is held, which rounds an attempt, a grant, an extend and a release
// send, and what a refusal means. Pure: the scripts themselves run against real masters in
// tests/integration/kinds_test.cc, and the engine's use of the kinds against fake masters in
// lock_engine_kinds_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "core/election_record.h"
#include "core/key_parts.h"
#include "locking/kinds/kind.h"
#include "locking/kinds/kinds.h"
#include "redis/scripts.h"

namespace lw {
namespace {

using ::testing::ElementsAre;

const LockShape kLock{};
const LockShape kFour{LockKind::kSemaphore, 4};
const LockShape kElection{LockKind::kElection};

class LockKindsTest : public ::testing::Test {
 protected:
  HoldPlace Place(LockShape shape, HoldMode mode, int part = -1,
                  std::string_view record = {}) const {
    HoldPlace p{prefix_, fence_prefix_, name_, shape, mode, part};
    p.record = record;
    return p;
  }
  AttemptCall Call(const HoldPlace& p, uint64_t waiter = 7, int attempt = 1,
                   int fence_needed = 0) const {
    return {p, token_, waiter, attempt, 5000, fence_needed, 1200, value_prefix_};
  }
  static Holders HeldAs(std::initializer_list<std::pair<HoldMode, int>> parts) {
    Holders out;
    for (const auto& [mode, part] : parts) {
      out.push_back(std::make_unique<Holder>());
      out.back()->mode = mode;
      out.back()->part = static_cast<int16_t>(part);
    }
    return out;
  }
  static RoundResult Refusal(KindRefusals r) {
    RoundResult res{VoteTally(5, 3), {}, -1, 0, std::move(r), {}, {}};
    return res;
  }

  const std::string prefix_ = "lock:";
  const std::string fence_prefix_ = "fence:";
  const std::string name_ = "r";
  const std::string token_ = "t";
  const std::string value_prefix_ = "agent:";
};

// ---- the queue

TEST_F(LockKindsTest, EachKindSaysWhichPartAnAcquireTakes) {
  EXPECT_EQ(KindOf(kLock).ModeAsked(false), HoldMode::kExclusive);
  EXPECT_EQ(KindOf(kLock).ModeAsked(true), HoldMode::kShared);
  EXPECT_EQ(KindOf(kFour).ModeAsked(true), HoldMode::kPermit);
  EXPECT_EQ(KindOf(kElection).ModeAsked(true), HoldMode::kExclusive);
  EXPECT_TRUE(KindOf(kElection).AlwaysFenced());
  EXPECT_FALSE(KindOf(kLock).AlwaysFenced());
  EXPECT_FALSE(KindOf(kFour).AlwaysFenced());
}

TEST_F(LockKindsTest, ReadersShareWithReadersAndAWriterWaitsForEveryone) {
  const Kind& k = KindOf(kLock);
  EXPECT_TRUE(k.MayContendBeside(kLock, HoldMode::kShared, HeldAs({{HoldMode::kShared, -1}})));
  EXPECT_FALSE(k.MayContendBeside(kLock, HoldMode::kExclusive, HeldAs({{HoldMode::kShared, -1}})));
  EXPECT_FALSE(k.MayContendBeside(kLock, HoldMode::kShared, HeldAs({{HoldMode::kExclusive, -1}})));
  EXPECT_FALSE(
      KindOf(kElection).MayContendBeside(kElection, HoldMode::kExclusive,
                                         HeldAs({{HoldMode::kExclusive, -1}})));
}

TEST_F(LockKindsTest, ASemaphoreLetsItsFrontContendWhileAPermitIsFreeHere) {
  const Kind& k = KindOf(kFour);
  EXPECT_TRUE(k.MayContendBeside(kFour, HoldMode::kPermit,
                                 HeldAs({{HoldMode::kPermit, 0}, {HoldMode::kPermit, 1},
                                         {HoldMode::kPermit, 2}})));
  EXPECT_FALSE(k.MayContendBeside(kFour, HoldMode::kPermit,
                                  HeldAs({{HoldMode::kPermit, 0}, {HoldMode::kPermit, 1},
                                          {HoldMode::kPermit, 2}, {HoldMode::kPermit, 3}})));
}

TEST_F(LockKindsTest, APermitIsChosenAmongThoseNotHeldHereAndAFreeOneReportedIsTriedFirst) {
  const Kind& k = KindOf(kFour);
  KindSlot state;
  std::mt19937_64 rng(1);
  const Holders held = HeldAs({{HoldMode::kPermit, 0}, {HoldMode::kPermit, 2}});
  for (int i = 0; i < 20; ++i) {
    const int p = k.ChoosePart(kFour, state, held, rng);
    EXPECT_TRUE(p == 1 || p == 3) << p;
  }
  KindRefusals r;
  r.free_permits = {0, 0, 0, 3};  // permit 3 free on 3 masters
  const RefusalReading reading = k.Refused(Refusal(r), kFour, state, 7, 3, true);
  EXPECT_TRUE(reading.retry_now);
  EXPECT_EQ(k.ChoosePart(kFour, state, held, rng), 3);
  EXPECT_EQ(KindOf(kLock).ChoosePart(kLock, state, held, rng), -1);
}

TEST_F(LockKindsTest, ASemaphoreRetriesAFreePermitAtOnceOnlyAFewTimesInARow) {
  const Kind& k = KindOf(kFour);
  KindSlot state;
  KindRefusals r;
  r.free_permits = {3, 0, 0, 0};
  int quick = 0;
  while (k.Refused(Refusal(r), kFour, state, 7, 3, true).retry_now && quick < 10) ++quick;
  EXPECT_EQ(quick, 3);
  EXPECT_TRUE(k.Refused(Refusal(r), kFour, state, 7, 3, true).retry_now) << "the count restarts";
  EXPECT_FALSE(k.Refused(Refusal(r), kFour, state, 7, 3, false).retry_now)
      << "not when the engine may not retry";
  r.free_permits = {2, 0, 0, 0};
  EXPECT_FALSE(k.Refused(Refusal(r), kFour, state, 7, 3, true).retry_now) << "below quorum";
}

TEST_F(LockKindsTest, RefusalsSayWhyAndNameAResourceOfAnotherKind) {
  KindSlot state;
  KindRefusals writer;
  writer.writer = 2;
  EXPECT_EQ(KindOf(kLock).Refused(Refusal(writer), kLock, state, 7, 3, true).why,
            "a writer holds it on 2 master(s)");
  KindRefusals taken;
  taken.taken = 3;
  EXPECT_EQ(KindOf(kFour).Refused(Refusal(taken), kFour, state, 7, 3, true).why,
            "all 4 permits were held");
  KindRefusals foreign;
  foreign.foreign = kFour.Marker();
  const RefusalReading reading = KindOf(kLock).Refused(Refusal(foreign), kLock, state, 7, 3, true);
  ASSERT_TRUE(reading.foreign);
  EXPECT_EQ(*reading.foreign, "a semaphore of 4 permits on a master");
  EXPECT_FALSE(reading.retry_now);
}

// ---- rounds

TEST_F(LockKindsTest, AnExclusiveAcquireChecksReadersAndLeavesItsMarkUntilGranted) {
  const Kind& k = KindOf(kLock);
  KindSlot state;
  const HoldPlace p = Place(kLock, HoldMode::kExclusive);
  const RoundRequest first = k.AcquireRound(Call(p), state);
  EXPECT_EQ(first.script, scripts::KindScript::kClaimExclusive);
  EXPECT_THAT(first.keys, ElementsAre("lock:r", "lock:r\x1freaders", "lock:r\x1fwriter-waiting"));
  EXPECT_THAT(first.args, ElementsAre("5000", "1200", "agent:t", "0", "agent:", "-1", "0"));
  // Later attempts of the same waiter keep its first mark, and say a master may hold it.
  const std::string later_token = "u";
  const AttemptCall later{p, later_token, 7, 2, 5000, 4, 1200, value_prefix_};
  const RoundRequest fenced = k.AcquireRound(later, state);
  EXPECT_THAT(fenced.args, ElementsAre("5000", "1200", "agent:t", "1", "agent:", "-1", "0"));
  EXPECT_EQ(fenced.keys.back(), "fence:r");
  EXPECT_EQ(fenced.needed, 4);
  // Readers refused it somewhere: its grant drops the mark, and giving up drops it too.
  KindRefusals readers;
  readers.readers = 1;
  k.Heard(Refusal(readers), state, 7);
  const RoundRequest undo = k.UndoRound(later, state, /*giving_up=*/true);
  EXPECT_EQ(undo.script, scripts::KindScript::kReleasePart);
  EXPECT_THAT(undo.args, ElementsAre("lockwarden:released:lock:r", "agent:t"));
  EXPECT_EQ(k.UndoRound(later, state, /*giving_up=*/false).op, RoundOp::kDeleteIfHeld);
  const auto drop = k.Granted(later, state);
  ASSERT_TRUE(drop);
  EXPECT_EQ(drop->key, "lock:r\x1fwriter-waiting");
  EXPECT_EQ(drop->token, "t");
  EXPECT_EQ(state, nullptr) << "the mark ends with the acquire";
  // The next waiter gets a mark of its own. Granted with no master refusing it for readers, it
  // has no mark to drop, and its mark is not kept beside the hold either.
  EXPECT_THAT(k.AcquireRound(Call(p, 8), state).args,
              ElementsAre("5000", "1200", "agent:t", "0", "agent:", "-1", "0"));
  EXPECT_NE(state, nullptr);
  EXPECT_FALSE(k.Granted(Call(p, 8), state)) << "no master refused it for readers: no mark to drop";
  EXPECT_EQ(state, nullptr) << "the mark ends with the acquire";
}

// ---- turns (docs/safety.md, "Fair turns")

TEST_F(LockKindsTest, EveryKindThatWaitsTakesTurnsAndSaysSoInItsClaim) {
  EXPECT_TRUE(KindOf(kLock).TakesTurns(HoldMode::kExclusive));
  EXPECT_TRUE(KindOf(kLock).TakesTurns(HoldMode::kShared));
  EXPECT_TRUE(KindOf(kFour).TakesTurns(HoldMode::kPermit));
  EXPECT_TRUE(KindOf(kElection).TakesTurns(HoldMode::kExclusive));
  KindSlot state;
  const HoldPlace writer = Place(kLock, HoldMode::kExclusive);  // a call refers to its place
  AttemptCall call = Call(writer);
  call.waited_ms = 250;
  call.ask_others = true;
  EXPECT_THAT(KindOf(kLock).AcquireRound(call, state).args,
              ElementsAre("5000", "1200", "agent:t", "0", "agent:", "250", "1"));
  const HoldPlace reader = Place(kLock, HoldMode::kShared);
  AttemptCall read = Call(reader);
  read.waited_ms = 40;
  const RoundRequest shared = KindOf(kLock).AcquireRound(read, state);
  EXPECT_THAT(shared.keys, ElementsAre("lock:r", "lock:r\x1freaders", "lock:r\x1fwriter-waiting"));
  EXPECT_THAT(shared.args, ElementsAre("5000", "agent:", "40", "1200", "0"));
}

TEST_F(LockKindsTest, AReleaseInTurnNamesTheQueueTheNextWaitAndTheReservation) {
  const Turn turn{75, 200};
  const RoundRequest mutex =
      KindOf(kLock).ReleaseTurn(Place(kLock, HoldMode::kExclusive), "t", value_prefix_, turn);
  EXPECT_EQ(mutex.script, scripts::KindScript::kReleaseTurn);
  EXPECT_EQ(mutex.op, RoundOp::kKindRelease);
  EXPECT_TRUE(mutex.wait_all);
  EXPECT_THAT(mutex.keys, ElementsAre("lock:r"));  // its queue's keys are derived from it
  EXPECT_THAT(mutex.args, ElementsAre("lockwarden:released:lock:r", "75", "200", "agent:"));
  // A permit is reserved at its own key; the marker is named so that it outlives the reservation.
  const RoundRequest permit =
      KindOf(kFour).ReleaseTurn(Place(kFour, HoldMode::kPermit, 2), "t", value_prefix_, turn);
  EXPECT_THAT(permit.keys, ElementsAre("lock:r\x1fpermit:2", "lock:r"));
  EXPECT_EQ(permit.key, "lock:r\x1fpermit:2");
  // An election's release drops the leader's record too, where it is this leader's.
  const RoundRequest leader = KindOf(kElection).ReleaseTurn(
      Place(kElection, HoldMode::kExclusive, -1, "agent:t\x1frec"), "t", value_prefix_, turn);
  EXPECT_THAT(leader.keys, ElementsAre("lock:r", "lock:r", "lock:r\x1fleader"));
  EXPECT_EQ(leader.args.at(4), "agent:t\x1frec");
  // A reader's release frees no key: it reserves nothing.
  EXPECT_EQ(KindOf(kLock)
                .ReleaseTurn(Place(kLock, HoldMode::kShared), "t", value_prefix_, turn)
                .script,
            scripts::KindScript::kReleaseShared);
  const RoundRequest leave = kinds::LeaveQueue(Place(kLock, HoldMode::kExclusive), value_prefix_);
  EXPECT_EQ(leave.script, scripts::KindScript::kLeaveQueue);
  EXPECT_THAT(leave.keys, ElementsAre("lock:r\x1fqueue", "lock:r\x1fqueue-alive"));
  EXPECT_THAT(leave.args, ElementsAre("agent:"));
}

TEST_F(LockKindsTest, ReadHoldsLiveInTheReadersSet) {
  const Kind& k = KindOf(kLock);
  KindSlot state;
  const HoldPlace p = Place(kLock, HoldMode::kShared);
  EXPECT_EQ(k.HoldKey(p), "lock:r\x1freaders");
  EXPECT_EQ(k.AcquireRound(Call(p), state).script, scripts::KindScript::kClaimShared);
  const RoundRequest release = k.ReleaseRound(p, "t");
  EXPECT_EQ(release.script, scripts::KindScript::kReleaseShared);
  EXPECT_THAT(release.args, ElementsAre("lockwarden:released:lock:r"));
  EXPECT_TRUE(release.wait_all);
  const RoundRequest extend = k.ExtendRound(p, "t", 9000);
  EXPECT_EQ(extend.script, scripts::KindScript::kExtendShared);
  EXPECT_THAT(extend.keys, ElementsAre("lock:r\x1freaders"));
  EXPECT_EQ(k.ReleaseRound(Place(kLock, HoldMode::kExclusive), "t").op, RoundOp::kDeleteIfHeld)
      << "a mutex's release stays the plain compare-and-delete";
  EXPECT_EQ(k.ExtendRound(Place(kLock, HoldMode::kExclusive), "t", 9000).op,
            RoundOp::kExtendIfHeld);
  // The release names P R whatever the layout: the last reader takes the readers' mark.
  EXPECT_THAT(release.keys, ElementsAre("lock:r\x1freaders", "lock:r"));
}

// docs/safety.md §7, "Marked readers": where readers are marked, a read hold's claim asks for
// the mark and its renewal keeps it; a plain exclusive claim goes native once the fleet allows.
TEST_F(LockKindsTest, MarkedReadersAndNativeClaims) {
  const Kind& k = KindOf(kLock);
  KindSlot state;
  HoldPlace reader = Place(kLock, HoldMode::kShared);
  reader.mark_readers = true;
  EXPECT_EQ(k.AcquireRound(Call(reader), state).args.back(), "1");
  EXPECT_THAT(k.ExtendRound(reader, "t", 9000).keys,
              ElementsAre("lock:r\x1freaders", "lock:r"));

  HoldPlace writer = Place(kLock, HoldMode::kExclusive);
  writer.mark_readers = true;
  EXPECT_FALSE(k.AcquireRound(Call(writer), state).native) << "not before the fleet allows it";
  writer.native_claims = true;
  const RoundRequest plain = k.AcquireRound(Call(writer), state);
  EXPECT_TRUE(plain.native);
  EXPECT_EQ(plain.key, "lock:r");
  EXPECT_EQ(plain.script, scripts::KindScript::kClaimExclusive) << "the script where refused";
  AttemptCall fenced = Call(writer);
  fenced.fence_needed = 4;
  EXPECT_FALSE(k.AcquireRound(fenced, state).native) << "a fenced claim reads the counter";
  AttemptCall asking = Call(writer);
  asking.ask_others = true;
  EXPECT_FALSE(k.AcquireRound(asking, state).native) << "it must hear who waits elsewhere";
  EXPECT_FALSE(KindOf(kElection).AcquireRound(Call(writer), state).native);
}

TEST_F(LockKindsTest, APermitNamesItsMarkerItsKeyAndWhereTheOthersAre) {
  const Kind& k = KindOf(kFour);
  KindSlot state;
  const HoldPlace p = Place(kFour, HoldMode::kPermit, 2);
  const RoundRequest req = k.AcquireRound(Call(p, 7, 1, 3), state);
  EXPECT_EQ(req.script, scripts::KindScript::kClaimPermit);
  EXPECT_THAT(req.keys, ElementsAre("lock:r", "lock:r\x1fpermit:2", "lock:r\x1freaders",
                                    "fence:r\x1fpermit:2"));
  EXPECT_THAT(req.args, ElementsAre("5000", "lockwarden:semaphore:4", "4", "2",
                                    "lock:r\x1fpermit:", "agent:", "-1", "1200", "0"));
  std::string note = "x";
  const RoundRequest phase2 = k.FenceRound(Call(p, 7, 1, 3), 9, 0, "", &note);
  EXPECT_EQ(phase2.op, RoundOp::kRaiseFenceIfHeld);
  EXPECT_EQ(phase2.key, "lock:r\x1fpermit:2");
  EXPECT_EQ(phase2.fence_key, "fence:r\x1fpermit:2");
  EXPECT_EQ(note, "") << "a permit keeps nothing beside its hold";
  EXPECT_EQ(k.ReleaseRound(p, "t").script, scripts::KindScript::kReleasePart);
  EXPECT_THAT(k.ExtendRound(p, "t", 100).keys, ElementsAre("lock:r", "lock:r\x1fpermit:2"));
}

TEST_F(LockKindsTest, AnElectionsPhaseTwoWritesTheTermAndTheRecordWhereTheHoldIs) {
  const Kind& k = KindOf(kElection);
  KindSlot state;
  const HoldPlace p = Place(kElection, HoldMode::kExclusive);
  const RoundRequest acquire = k.AcquireRound(Call(p, 7, 1, 2), state);
  EXPECT_EQ(acquire.script, scripts::KindScript::kClaimExclusive);
  EXPECT_EQ(acquire.args[2], "") << "an election leaves no writer-waiting mark";
  EXPECT_EQ(acquire.keys.back(), "fence:r");
  std::string note;
  const RoundRequest req = k.FenceRound(Call(p, 7, 1, 2), 3, 9, "{}", &note);
  EXPECT_EQ(note, StoredRecord("agent:t", {3, 9, "{}"}));
  EXPECT_EQ(req.script, scripts::KindScript::kFenceRecord);
  EXPECT_THAT(req.keys, ElementsAre("lock:r", "fence:r", LeaderKey("lock:", "r")));
  EXPECT_THAT(req.args, ElementsAre("3", note, scripts::ReleaseChannel("lock:r")));
  EXPECT_EQ(req.needed, 2);
}

TEST_F(LockKindsTest, AnElectionsRecordLivesAsLongAsItsHoldAndGoesOnlyWithThisLeader) {
  const Kind& k = KindOf(kElection);
  const RoundRequest extend = k.ExtendRound(Place(kElection, HoldMode::kExclusive, -1, "rec"),
                                            "t", 6000);
  EXPECT_EQ(extend.script, scripts::KindScript::kExtendPermit);
  // kExtendPermit extends KEYS[2] if it holds the value, and KEYS[1] to at least as long.
  EXPECT_THAT(extend.keys, ElementsAre(LeaderKey("lock:", "r"), "lock:r"));
  const RoundRequest release = k.ReleaseRound(Place(kElection, HoldMode::kExclusive, -1, "rec"),
                                              "t");
  EXPECT_EQ(release.script, scripts::KindScript::kReleasePart);
  EXPECT_THAT(release.keys, ElementsAre("lock:r", LeaderKey("lock:", "r")));
  EXPECT_THAT(release.args, ElementsAre(scripts::ReleaseChannel("lock:r"), "rec"));
}

TEST_F(LockKindsTest, AViewOfALeaderCarriesItsRecord) {
  Holder h;
  h.note = std::make_unique<std::string>(StoredRecord("agent:t", {3, 9, R"({"v":1})"}));
  LockView view;
  KindOf(kElection).Describe(h, view);
  ASSERT_TRUE(view.election);
  EXPECT_EQ(view.election->term, 3);
  LockView plain;
  KindOf(kLock).Describe(h, plain);
  EXPECT_FALSE(plain.election);
}

// The engine's release and the key-parts table (core/key_parts.h, which the scanner, the probe,
// the fleet reader and revoke go by) agree: every hold a kind takes is released from a part
// the table says holds holds of that mode, and removed with what the table says (an
// election's base key with its leader record); and every part the table removes is one some
// kind's hold is released from.
TEST_F(LockKindsTest, EveryReleaseRemovesAPartTheKeyPartsTableRemovesTheSameWay) {
  struct HoldCase {
    LockShape shape;
    HoldMode mode;
    int part;
  };
  const HoldCase holds[] = {{kLock, HoldMode::kExclusive, -1},
                            {kLock, HoldMode::kShared, -1},
                            {kFour, HoldMode::kPermit, 2},
                            {kElection, HoldMode::kExclusive, -1}};
  std::set<KeyPart::Part> released;
  for (const HoldCase& c : holds) {
    const HoldPlace place = Place(c.shape, c.mode, c.part, "rec");
    const RoundRequest release = KindOf(c.shape).ReleaseRound(place, "t");
    const std::string what =
        std::string(NameOf(c.shape.kind)) + "/" + std::string(NameOf(c.mode));
    const KeyPartRow* row = RowOfKey(prefix_, release.key);
    ASSERT_NE(row, nullptr) << what << ": " << release.key;
    EXPECT_NE(row->removal, PartRemoval::kNone) << what;
    EXPECT_EQ(row->mode, c.mode) << what;
    EXPECT_EQ(release.key, KindOf(c.shape).HoldKey(place)) << what;
    const bool with_record = c.shape.kind == LockKind::kElection;
    EXPECT_EQ(std::count(release.keys.begin(), release.keys.end(), LeaderKey(prefix_, name_)),
              with_record ? 1 : 0)
        << what;
    if (with_record) {
      EXPECT_EQ(row->removal, PartRemoval::kDeleteWithRecord);
    }
    released.insert(row->part);
  }
  for (const KeyPartRow& row : KeyPartRows()) {
    EXPECT_EQ(released.count(row.part), row.removal == PartRemoval::kNone ? 0u : 1u) << row.name;
  }
}

}  // namespace
}  // namespace lw
