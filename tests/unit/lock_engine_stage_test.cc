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

TEST_F(LockEngineTest, OnlyWhatChangedSinceACopyIsHandedAsUpdatesFullHoldsOrGone) {
  MakeEngine();
  const std::string kept = Hold(1, "kept", 10'000);
  const std::string renewed = Hold(1, "renewed", 10'000);
  const std::string ended = Hold(1, "ended", 10'000);
  std::unordered_set<uint64_t> copied;
  uint64_t ended_serial = 0;
  for (const auto& h : engine_->HoldsOf(1)) {
    copied.insert(h.serial);
    if (h.token == ended) ended_serial = h.serial;
  }
  std::unordered_map<uint64_t, std::string> touched;
  engine_->TrackChanges(&touched);
  ExtendRecord* e = Extend(1, "renewed", renewed, 20'000);
  Release(1, "ended", ended);
  const std::string fresh = Hold(1, "fresh", 10'000);
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }));
  engine_->TrackChanges(nullptr);
  Hold(1, "untracked", 10'000);  // after tracking stopped: not a change of the hand-over

  std::unordered_map<SessionId, std::vector<HandedHold>> full;
  std::unordered_map<SessionId, std::vector<HoldUpdate>> updates;
  std::vector<uint64_t> gone;
  engine_->ChangesSince(copied, touched, &full, &updates, &gone);
  ASSERT_EQ(updates[1].size(), 1u) << "only the renewed copy; the kept one did not change";
  EXPECT_EQ(updates[1][0].ttl_ms, 20'000);
  ASSERT_EQ(full[1].size(), 1u);
  EXPECT_EQ(full[1][0].token, fresh);
  EXPECT_EQ(gone, std::vector<uint64_t>{ended_serial});
  (void)kept;
}

TEST_F(LockEngineTest, AStagedHoldIsUpdatedOrDroppedWithoutAWordToTheMasters) {
  MakeEngine();
  const auto past = Clock::now() - std::chrono::milliseconds(1);
  auto staged = engine_->Stage(1, Handed("s", 7, past));
  ASSERT_TRUE(std::holds_alternative<const Holder*>(staged)) << "entered whatever its validity";
  auto other = engine_->Stage(1, Handed("t", 8, Clock::now() + std::chrono::seconds(5)));
  ASSERT_TRUE(std::holds_alternative<const Holder*>(other));
  EXPECT_FALSE(engine_->Adopt(2, Handed("u", 9, past)) == std::nullopt)
      << "an adopt (no pre-copy) still refuses a hold whose validity ran out";

  const auto later = Clock::now() + std::chrono::seconds(2);
  engine_->UpdateStaged("s", std::get<const Holder*>(staged), {7, 2'500, later});
  engine_->DropStaged("t", std::get<const Holder*>(other));
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
