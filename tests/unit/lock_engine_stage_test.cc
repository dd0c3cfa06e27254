// LockEngine's part of a pre-copied upgrade (docs/upgrade.md, "Pre-copy"): the old process's
// holds split into updates and full holds by what was copied; the next process's staged holds
// entered whatever their validity, brought up to date, or dropped without a word to the masters.

#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

HandedHold Handed(const std::string& resource, uint64_t serial, Clock::time_point valid_until) {
  HandedHold h;
  h.serial = serial;
  h.resource = resource;
  h.token = h.value = std::string(40, static_cast<char>('a' + serial % 6));
  h.ttl_ms = 3'000;
  h.renew = false;
  h.acquired = Clock::now() - std::chrono::seconds(1);
  h.valid_until = valid_until;
  return h;
}

TEST_F(LockEngineTest, HoldsSinceACopySplitIntoUpdatesAndFullHolds) {
  MakeEngine();
  const std::string a = Hold(1, "a");
  Hold(1, "b");
  const auto all = engine_->HoldsOf(1);
  ASSERT_EQ(all.size(), 2u);
  std::unordered_set<uint64_t> copied;
  for (const auto& h : all) {
    if (h.token == a) copied.insert(h.serial);
  }
  std::vector<HandedHold> full;
  std::vector<HoldUpdate> updates;
  engine_->HoldsSince(1, copied, &full, &updates);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(copied.count(updates[0].serial), 1u);
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].resource, "b");
  EXPECT_TRUE(engine_->HoldsOf(2).empty());
}

TEST_F(LockEngineTest, AStagedHoldIsUpdatedOrDroppedWithoutAWordToTheMasters) {
  MakeEngine();
  const auto past = Clock::now() - std::chrono::milliseconds(1);
  auto staged = engine_->Stage(1, Handed("s", 7, past));
  ASSERT_TRUE(std::holds_alternative<uint64_t>(staged)) << "entered whatever its validity";
  auto other = engine_->Stage(1, Handed("t", 8, Clock::now() + std::chrono::seconds(5)));
  ASSERT_TRUE(std::holds_alternative<uint64_t>(other));
  EXPECT_FALSE(engine_->Adopt(2, Handed("u", 9, past)) == std::nullopt)
      << "an adopt (no pre-copy) still refuses a hold whose validity ran out";

  const auto later = Clock::now() + std::chrono::seconds(2);
  engine_->UpdateStaged("s", std::get<uint64_t>(staged), {7, 2'500, later});
  engine_->DropStaged("t", std::get<uint64_t>(other));
  const auto held = engine_->books().HeldBy(1);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].resource, "s");
  EXPECT_GT(held[0].validity_ms, 1'000) << "the update's validity";
  EXPECT_EQ(engine_->books().Find("t"), nullptr);
  RunFor(50);
  EXPECT_TRUE(lost_.empty()) << "the updated hold is valid; the dropped one was not ours";
  EXPECT_EQ(TotalCommands(), 0u);
}

}  // namespace
}  // namespace lw::engine_test
