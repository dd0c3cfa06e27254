// Leak-scanner logic without Redis: TTL classification, partial grants, first-seen, pacing.

#include <gtest/gtest.h>

#include "core/lock_kind.h"
#include "scan/findings.h"

namespace lw {
namespace {

TEST(ClassifyTtl, NoTtlIsALeakOnAnyKey) {
  EXPECT_EQ(ClassifyTtl(-1, true, 1000), FindingKind::kNoTtl);
  EXPECT_EQ(ClassifyTtl(-1, false, 1000), FindingKind::kNoTtl);
}

TEST(ClassifyTtl, LongTtlIsSuspiciousOnlyOnLockKeys) {
  EXPECT_EQ(ClassifyTtl(1001, true, 1000), FindingKind::kTtlAboveMax);
  EXPECT_EQ(ClassifyTtl(1000, true, 1000), std::nullopt);
  EXPECT_EQ(ClassifyTtl(5'000'000, false, 1000), std::nullopt);
}

TEST(ClassifyTtl, GoneOrShortIsNothing) {
  EXPECT_EQ(ClassifyTtl(-2, true, 1000), std::nullopt);
  EXPECT_EQ(ClassifyTtl(0, true, 1000), std::nullopt);
  EXPECT_EQ(ClassifyTtl(500, true, 1000), std::nullopt);
}

std::vector<LockCopy> Copies(std::initializer_list<std::tuple<size_t, const char*, const char*>> l) {
  std::vector<LockCopy> out;
  for (const auto& [m, key, token] : l) out.push_back({m, key, token, 5000});
  return out;
}

TEST(PartialLeftovers, GrantOnQuorumIsNotPartial) {
  auto copies = Copies({{0, "lock:a", "t1"}, {1, "lock:a", "t1"}, {2, "lock:a", "t1"}});
  EXPECT_TRUE(PartialLeftovers(copies, 3, {}).empty());
}

TEST(PartialLeftovers, GrantShortOfQuorumIsReportedOncePerCopy) {
  auto copies = Copies({{0, "lock:a", "t1"}, {3, "lock:a", "t1"}, {1, "lock:b", "t2"},
                        {2, "lock:b", "t2"}, {4, "lock:b", "t2"}});
  auto found = PartialLeftovers(copies, 3, {});
  ASSERT_EQ(found.size(), 2u);
  for (const auto& f : found) {
    EXPECT_EQ(f.key, "lock:a");
    EXPECT_EQ(f.kind, FindingKind::kPartial);
    EXPECT_EQ(f.copies, 2);
  }
  EXPECT_EQ(found[0].master + found[1].master, 3u);
}

TEST(PartialLeftovers, TwoTokensOfOneKeyAreTwoGrants) {
  // 3 copies of the key, but no token has a quorum of 3: both grants are leftovers.
  auto copies = Copies({{0, "lock:a", "t1"}, {1, "lock:a", "t1"}, {2, "lock:a", "t2"}});
  EXPECT_EQ(PartialLeftovers(copies, 3, {}).size(), 3u);
}

TEST(PartialLeftovers, LiveGrantOfThisAgentIsNeverReported) {
  auto copies = Copies({{0, "lock:a", "mine"}, {1, "lock:a", "other"}});
  LiveGrants live = {{"lock:a", "mine"}};
  auto found = PartialLeftovers(copies, 2, live);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].master, 1u);
  EXPECT_EQ(PartialGrants(copies, 2), (Grants{{"lock:a", "mine"}, {"lock:a", "other"}}));
}

TEST(PartialLeftovers, CopiesWithoutTtlAreLeftToTheNoTtlFinding) {
  std::vector<LockCopy> copies = {{0, "lock:a", "t", -1}};
  EXPECT_TRUE(PartialLeftovers(copies, 2, {}).empty());
}

TEST(CarryFirstSeen, KeepsTheFirstTimeAndStampsNewOnes) {
  Finding old;
  old.master = 1;
  old.key = "lock:x";
  old.first_seen_unix_ms = 100;
  Finding again = old;
  again.first_seen_unix_ms = 0;
  Finding other_kind = again;
  other_kind.kind = FindingKind::kTtlAboveMax;
  Finding other_master = again;
  other_master.master = 2;
  std::vector<Finding> fresh = {again, other_kind, other_master};
  CarryFirstSeen(fresh, {old}, 500);
  EXPECT_EQ(fresh[0].first_seen_unix_ms, 100);
  EXPECT_EQ(fresh[1].first_seen_unix_ms, 500);
  EXPECT_EQ(fresh[2].first_seen_unix_ms, 500);
}

TEST(PrefixPattern, EscapesGlobCharacters) {
  EXPECT_EQ(PrefixPattern("lock:"), "lock:*");
  EXPECT_EQ(PrefixPattern("a*b?c[d]e\\"), "a\\*b\\?c\\[d\\]e\\\\*");
}

TEST(PaceDelay, HoldsTheRate) {
  using std::chrono::microseconds;
  // 1000 keys at 10k/s are due at 100 ms.
  EXPECT_EQ(PaceDelay(1000, microseconds(40'000), 10'000), microseconds(60'000));
  EXPECT_EQ(PaceDelay(1000, microseconds(150'000), 10'000), microseconds(0));
  EXPECT_EQ(PaceDelay(0, microseconds(0), 10'000), microseconds(0));
}

// ---- Key shapes of semaphores and read-write locks (core/lock_kind.h) ----------------------

Reply ScanStringReply(const std::string& text) {
  Reply r;
  r.kind = Reply::Kind::kString;
  r.text = text;
  return r;
}

// A ZRANGE WITHSCORES reply: member, score, member, score...
Reply ScanReadersReply(std::initializer_list<std::pair<const char*, const char*>> members) {
  Reply r;
  r.kind = Reply::Kind::kArray;
  for (const auto& [member, score] : members) {
    r.elements.push_back(ScanStringReply(member));
    r.elements.push_back(ScanStringReply(score));
  }
  return r;
}

TEST(HoldsOf, AMutexKeyAndAPermitAreHolds) {
  auto base = HoldsOf("lock:", 1, "lock:db", ScanStringReply("a:t1"), 4000, 0);
  ASSERT_EQ(base.size(), 1u);
  EXPECT_EQ(base[0].master, 1u);
  EXPECT_EQ(base[0].token, "a:t1");
  EXPECT_EQ(base[0].ttl_ms, 4000);
  const std::string permit = PermitKey("lock:", "pool", 2);
  auto held = HoldsOf("lock:", 0, permit, ScanStringReply("a:t2"), 3000, 0);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].key, permit);
}

TEST(HoldsOf, MarksAreNoHoldsSoNeverPartial) {
  const LockShape four{LockKind::kSemaphore, 4};
  EXPECT_TRUE(HoldsOf("lock:", 0, "lock:pool", ScanStringReply(four.Marker()), 5000, 0).empty());
  EXPECT_TRUE(HoldsOf("lock:", 0, WriterWaitingKey("lock:", "cfg"), ScanStringReply("a:t"), 900, 0)
                  .empty());
  // A part this version does not know: its TTL is checked, it joins no partial check.
  EXPECT_TRUE(HoldsOf("lock:", 0, "lock:x\x1fnew-part", ScanStringReply("a:t"), 900, 0).empty());
  // Even on a single master, a marker left by a failed acquire is not a partial leftover.
  std::vector<LockCopy> copies;
  for (size_t m = 0; m < 1; ++m) {
    auto h = HoldsOf("lock:", m, "lock:pool", ScanStringReply(four.Marker()), 5000, 0);
    copies.insert(copies.end(), h.begin(), h.end());
  }
  EXPECT_TRUE(PartialLeftovers(copies, 2, {}).empty());
}

TEST(HoldsOf, ReadersAreTheLiveMembersOfTheSet) {
  const std::string key = ReadersKey("lock:", "cfg");
  const Reply set = ScanReadersReply({{"a:gone", "1000"}, {"b:t1", "1500"}, {"c:t2", "9000"}});
  auto holds = HoldsOf("lock:", 2, key, set, 5000, 1000);
  ASSERT_EQ(holds.size(), 2u);  // a:gone expired at the master's now: not a hold
  EXPECT_EQ(holds[0].token, "b:t1");
  EXPECT_EQ(holds[0].ttl_ms, 500);
  EXPECT_EQ(holds[1].token, "c:t2");
  EXPECT_EQ(holds[1].ttl_ms, 5000);  // at most the set's PTTL
  // A set without a TTL is a no_ttl finding already, not partial.
  EXPECT_TRUE(HoldsOf("lock:", 2, key, set, -1, 1000).empty());
  // A reply of another type (WRONGTYPE from a foreign writer) shows no hold and fails nothing.
  Reply wrong;
  wrong.kind = Reply::Kind::kError;
  wrong.text = "WRONGTYPE Operation against a key holding the wrong kind of value";
  EXPECT_TRUE(HoldsOf("lock:", 2, key, wrong, 5000, 1000).empty());
  EXPECT_TRUE(HoldsOf("lock:", 2, "lock:cfg", wrong, 5000, 1000).empty());
}

TEST(HoldsOf, AReaderOnTooFewMastersIsPartialAndItsFindingIsAZset) {
  const std::string key = ReadersKey("lock:", "cfg");
  auto copies = HoldsOf("lock:", 0, key, ScanReadersReply({{"a:t1", "9000"}}), 5000, 1000);
  auto partial = PartialLeftovers(copies, 2, {});
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_EQ(partial[0].redis_type, "zset");
  EXPECT_TRUE(PartialLeftovers(copies, 2, {{key, "a:t1"}}).empty());  // held through this agent
}

TEST(MasterNowMs, ReadsTime) {
  EXPECT_EQ(MasterNowMs(ScanReadersReply({{"1700000000", "123456"}})), 1'700'000'000'123);
  EXPECT_EQ(MasterNowMs(ScanStringReply("x")), std::nullopt);
}

}  // namespace
}  // namespace lw

namespace lw {
namespace {

// A master that stays down is said once, then only when something changes: it logged "leak scan
// of 127.0.0.1:7301 failed" every scan interval for as long as it was down.
TEST(NewsOfScanPass, AFailureIsSaidOnceThenOnlyWhenItChanges) {
  const std::string refused = "cannot connect to 127.0.0.1:7301: Connection refused";
  const auto first = NewsOfScanPass("127.0.0.1:7301", "", refused);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->warn);
  EXPECT_EQ(first->text, "leak scan of 127.0.0.1:7301 failed: " + refused +
                             " (said again only when it works again or fails otherwise)");
  EXPECT_FALSE(NewsOfScanPass("127.0.0.1:7301", refused, refused).has_value());

  const auto other = NewsOfScanPass("127.0.0.1:7301", refused, "SCAN: NOPERM");
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(other->warn);
  EXPECT_NE(other->text.find("failed: SCAN: NOPERM"), std::string::npos) << other->text;

  const auto back = NewsOfScanPass("127.0.0.1:7301", "SCAN: NOPERM", "");
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(back->warn);
  EXPECT_EQ(back->text, "leak scan of 127.0.0.1:7301 works again");
}

TEST(NewsOfScanPass, PassesThatGoWellSayNothing) {
  EXPECT_FALSE(NewsOfScanPass("127.0.0.1:7301", "", "").has_value());
}

}  // namespace
}  // namespace lw
