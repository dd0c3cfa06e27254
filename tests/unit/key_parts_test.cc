// The table of key parts (core/key_parts.h): how each part of a resource's state is read,
// checked and removed, as the words the scanner, the probe, the fleet reader and revoke send.

#include "core/key_parts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/election_record.h"

namespace lw {
namespace {

using ::testing::ElementsAre;
using Part = KeyPart::Part;

TEST(KeyPartsTest, EveryPartHasOneRowInPartOrder) {
  const auto rows = KeyPartRows();
  ASSERT_EQ(rows.size(), 7u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(rows[i].part), i);
    EXPECT_EQ(&RowOf(rows[i].part), &rows[i]);
  }
  EXPECT_EQ(RowOf(Part::kWriterWaiting).name, "writer-waiting");
}

TEST(KeyPartsTest, OnlyAReadersSetAndTheQueueAreSortedSets) {
  for (const KeyPartRow& row : KeyPartRows()) {
    const bool members =
        row.part == Part::kReaders || row.part == Part::kQueue || row.part == Part::kQueueAlive;
    EXPECT_EQ(row.value == PartValue::kMembers, members) << row.name;
    EXPECT_EQ(RedisTypeOf(row), members ? "zset" : "string") << row.name;
  }
}

TEST(KeyPartsTest, KeysReadBackToTheirRow) {
  EXPECT_EQ(RowOfKey("lock:", "lock:cfg")->part, Part::kBase);
  EXPECT_EQ(RowOfKey("lock:", PermitKey("lock:", "pool", 3))->part, Part::kPermit);
  EXPECT_EQ(RowOfKey("lock:", ReadersKey("lock:", "cfg"))->part, Part::kReaders);
  EXPECT_EQ(RowOfKey("lock:", WriterWaitingKey("lock:", "cfg"))->part, Part::kWriterWaiting);
  EXPECT_EQ(RowOfKey("lock:", LeaderKey("lock:", "jobs"))->part, Part::kLeader);
  EXPECT_EQ(RowOfKey("lock:", QueueKey("lock:", "jobs"))->part, Part::kQueue);
  EXPECT_EQ(RowOfKey("lock:", QueueAliveKey("lock:", "jobs"))->part, Part::kQueueAlive);
  EXPECT_EQ(RowOfKey("", ReadersKey("lock:", "cfg"))->part, Part::kReaders);  // any prefix
  EXPECT_EQ(RowOfKey("lock:", "lock:x\x1fsomething-new"), nullptr);
  EXPECT_EQ(RowOfKey("lock:", "other:cfg"), nullptr);
  // A part this version does not know is read as a string.
  EXPECT_EQ(RowToRead("lock:", "lock:x\x1fsomething-new").part, Part::kBase);
  EXPECT_EQ(RowToRead("", ReadersKey("lock:", "cfg")).part, Part::kReaders);
  for (const std::string& key :
       {std::string("lock:cfg"), PermitKey("lock:", "pool", 3), ReadersKey("lock:", "cfg"),
        WriterWaitingKey("lock:", "cfg"), LeaderKey("lock:", "jobs"), QueueKey("lock:", "q"),
        QueueAliveKey("lock:", "q")}) {
    EXPECT_EQ(KeyOfPart("lock:", *ParseLockKey("lock:", key)), key);
  }
}

TEST(KeyPartsTest, MarksAndRecordsAreNoHoldsAndAMarkerIsNone) {
  const std::string marker = LockShape{LockKind::kSemaphore, 4}.Marker();
  EXPECT_TRUE(IsHold(RowOf(Part::kBase), "a:t1"));
  EXPECT_FALSE(IsHold(RowOf(Part::kBase), marker));
  EXPECT_TRUE(IsHold(RowOf(Part::kPermit), "a:t1"));
  EXPECT_TRUE(IsHold(RowOf(Part::kReaders), "a:t1"));
  EXPECT_FALSE(IsHold(RowOf(Part::kWriterWaiting), "a:t1"));
  EXPECT_FALSE(IsHold(RowOf(Part::kLeader), StoredRecord("a:t1", {1, 2, "{}"})));
  // Turns: a reservation at the base key and an agent's queue entries are no holds (never
  // partial, never revoked), and nothing removes them but their own expiry or their agent.
  EXPECT_FALSE(IsHold(RowOf(Part::kBase), Reservation("0123456789abcdef:")));
  EXPECT_TRUE(IsReservation(Reservation("0123456789abcdef:")));
  EXPECT_FALSE(IsReservation("0123456789abcdef:t1"));
  for (Part p : {Part::kQueue, Part::kQueueAlive}) {
    EXPECT_FALSE(IsHold(RowOf(p), "0123456789abcdef:"));
    EXPECT_FALSE(RemovalOf("lock:", KeyPart{"q", p, -1}, "0123456789abcdef:", "").has_value());
  }
  EXPECT_EQ(RowOf(Part::kBase).mode, HoldMode::kExclusive);
  EXPECT_EQ(RowOf(Part::kPermit).mode, HoldMode::kPermit);
  EXPECT_EQ(RowOf(Part::kReaders).mode, HoldMode::kShared);
}

TEST(KeyPartsTest, AStringIsListedWithGetAndASetWithZrange) {
  EXPECT_THAT(ListCommand(RowOf(Part::kBase), "lock:cfg", 1000, true),
              ElementsAre("GET", "lock:cfg"));
  const std::string set = ReadersKey("lock:", "cfg");
  EXPECT_THAT(ListCommand(RowOf(Part::kReaders), set, 1000, true),
              ElementsAre("ZRANGE", set, "0", "999", "WITHSCORES"));
  EXPECT_THAT(ListCommand(RowOf(Part::kReaders), set, 10, false),
              ElementsAre("ZRANGE", set, "0", "9"));
}

TEST(KeyPartsTest, AHoldIsCheckedByItsValueOrAsAMember) {
  const std::string set = ReadersKey("lock:", "cfg");
  EXPECT_THAT(CheckCommand(RowOf(Part::kReaders), set, "a:t1"), ElementsAre("ZSCORE", set, "a:t1"));
  EXPECT_THAT(CheckCommand(RowOf(Part::kPermit), "k", "a:t1"), ElementsAre("GET", "k"));
  EXPECT_TRUE(CheckAnswerHolds(RowOf(Part::kReaders), "1700000000000", "a:t1"));
  EXPECT_TRUE(CheckAnswerHolds(RowOf(Part::kBase), "a:t1", "a:t1"));
  EXPECT_FALSE(CheckAnswerHolds(RowOf(Part::kBase), "b:t2", "a:t1"));
}

TEST(KeyPartsTest, ABaseKeyIsRemovedWithTheLeaderRecordThatNamesIt) {
  const auto removal = RemovalOf("lock:", *ParseLockKey("lock:", "lock:jobs"), "a:t1", "ch");
  ASSERT_TRUE(removal);
  EXPECT_EQ(removal->script, RemovalScript::kDeleteWithRecord);
  EXPECT_THAT(removal->keys, ElementsAre("lock:jobs", LeaderKey("lock:", "jobs")));
  EXPECT_THAT(removal->args, ElementsAre("a:t1", "ch"));
  EXPECT_THAT(EvalTail(*removal),
              ElementsAre("2", "lock:jobs", LeaderKey("lock:", "jobs"), "a:t1", "ch"));
}

TEST(KeyPartsTest, APermitIsComparedAndDeletedAndAReaderRemovedAsAMember) {
  const std::string permit = PermitKey("lock:", "pool", 2);
  const auto p = RemovalOf("lock:", *ParseLockKey("lock:", permit), "a:t1", "ch");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->script, RemovalScript::kDeleteIfHeld);
  EXPECT_THAT(EvalTail(*p), ElementsAre("1", permit, "a:t1", "ch"));
  const std::string set = ReadersKey("lock:", "cfg");
  const auto r = RemovalOf("lock:", *ParseLockKey("lock:", set), "a:t1", "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->script, RemovalScript::kReleaseShared);
  // P R too: the last reader removed takes the readers' mark with it.
  EXPECT_THAT(EvalTail(*r), ElementsAre("2", set, "lock:cfg", "a:t1", ""));
}

TEST(KeyPartsTest, MarksAndRecordsAreNeverRemovedByThemselves) {
  EXPECT_FALSE(
      RemovalOf("lock:", *ParseLockKey("lock:", WriterWaitingKey("lock:", "cfg")), "a", "ch"));
  EXPECT_FALSE(RemovalOf("lock:", *ParseLockKey("lock:", LeaderKey("lock:", "jobs")), "a", "ch"));
}

}  // namespace
}  // namespace lw
