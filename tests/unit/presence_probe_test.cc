// Presence probe logic without Redis: what a GET reply says about a grant and which grants a
// round checks. The probe's thread is tested against real masters (integration).

#include "scan/presence_probe.h"

#include <gtest/gtest.h>

#include "core/lock_kind.h"
#include "redis/reply.h"

namespace lw {
namespace {

Reply MakeReply(Reply::Kind kind, std::string text = "") {
  Reply r;
  r.kind = kind;
  r.text = std::move(text);
  return r;
}

TEST(ClassifyPresence, OurTokenIsHeld) {
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kString, "tok-1"), "tok-1"),
            KeyPresence::kHeld);
}

TEST(ClassifyPresence, AnotherTokenIsOther) {
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kString, "tok-2"), "tok-1"),
            KeyPresence::kOther);
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kString, ""), "tok-1"), KeyPresence::kOther);
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kString, "tok-1x"), "tok-1"),
            KeyPresence::kOther);
}

TEST(ClassifyPresence, NilIsMissing) {
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kNil), "tok-1"), KeyPresence::kMissing);
}

TEST(ClassifyPresence, ErrorsAndOddRepliesAreUnknown) {
  // GET on a hash answers WRONGTYPE; the key exists but we cannot tell whose it is.
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kError, "WRONGTYPE ..."), "tok-1"),
            KeyPresence::kUnknown);
  // An error text equal to the token is still an error.
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kError, "tok-1"), "tok-1"),
            KeyPresence::kUnknown);
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kStatus, "tok-1"), "tok-1"),
            KeyPresence::kUnknown);
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kInteger), "tok-1"), KeyPresence::kUnknown);
  EXPECT_EQ(ClassifyPresence(MakeReply(Reply::Kind::kArray), "tok-1"), KeyPresence::kUnknown);
}

TEST(PresenceName, NamesEveryState) {
  EXPECT_EQ(PresenceName(KeyPresence::kUnknown), "unknown");
  EXPECT_EQ(PresenceName(KeyPresence::kHeld), "held");
  EXPECT_EQ(PresenceName(KeyPresence::kMissing), "missing");
  EXPECT_EQ(PresenceName(KeyPresence::kOther), "other");
}

TEST(PresenceGrantsForRound, KeepsAllUnderTheCap) {
  GrantList grants = {{"lock:a", "t1"}, {"lock:b", "t2"}};
  bool capped = true;
  EXPECT_EQ(GrantsForRound(grants, 2, &capped), grants);
  EXPECT_FALSE(capped);
}

TEST(PresenceGrantsForRound, CapsAndSaysSo) {
  GrantList grants = {{"lock:a", "t1"}, {"lock:b", "t2"}, {"lock:c", "t3"}};
  bool capped = false;
  GrantList expected = {{"lock:a", "t1"}, {"lock:b", "t2"}};
  EXPECT_EQ(GrantsForRound(grants, 2, &capped), expected);
  EXPECT_TRUE(capped);
}

TEST(PresenceGrantsForRound, OneEntryPerKeyAndDuplicatesDoNotCountTowardsTheCap) {
  GrantList grants = {{"lock:a", "t1"}, {"lock:a", "t9"}, {"lock:b", "t2"}};
  bool capped = true;
  GrantList expected = {{"lock:a", "t1"}, {"lock:b", "t2"}};
  EXPECT_EQ(GrantsForRound(grants, 2, &capped), expected);
  EXPECT_FALSE(capped);
}

TEST(PresenceGrantsForRound, EmptyIsEmpty) {
  bool capped = true;
  EXPECT_TRUE(GrantsForRound({}, 1000, &capped).empty());
  EXPECT_FALSE(capped);
}

TEST(PresenceCommand, AReadHoldIsAMemberOfTheReadersSet) {
  const std::string readers = ReadersKey("lock:", "cfg");
  EXPECT_EQ(PresenceCommand(readers, "a:t1"), (Command{"ZSCORE", readers, "a:t1"}));
  EXPECT_EQ(PresenceCommand("lock:cfg", "a:t1"), (Command{"GET", "lock:cfg"}));
  const std::string permit = PermitKey("lock:", "pool", 1);
  EXPECT_EQ(PresenceCommand(permit, "a:t1"), (Command{"GET", permit}));
}

TEST(ClassifyPresenceOf, AScoreIsHeldNilIsMissing) {
  const std::string readers = ReadersKey("lock:", "cfg");
  EXPECT_EQ(ClassifyPresenceOf(readers, MakeReply(Reply::Kind::kString, "1700000000000"), "a:t1"),
            KeyPresence::kHeld);
  EXPECT_EQ(ClassifyPresenceOf(readers, MakeReply(Reply::Kind::kNil), "a:t1"),
            KeyPresence::kMissing);
  EXPECT_EQ(ClassifyPresenceOf(readers, MakeReply(Reply::Kind::kError, "WRONGTYPE"), "a:t1"),
            KeyPresence::kUnknown);
  // Other keys read as before.
  EXPECT_EQ(ClassifyPresenceOf("lock:cfg", MakeReply(Reply::Kind::kString, "b:t"), "a:t1"),
            KeyPresence::kOther);
}

}  // namespace
}  // namespace lw
