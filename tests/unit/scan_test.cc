// Leak-scanner logic without Redis: TTL classification, partial grants, first-seen, pacing.

#include <gtest/gtest.h>

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
  EXPECT_EQ(PartialCandidates(copies, 2, live), std::set<std::string>{"lock:a"});
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

}  // namespace
}  // namespace lw
