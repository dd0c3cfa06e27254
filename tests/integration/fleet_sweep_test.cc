// The fleet reader's sweep against real masters, driven directly (no agent process): with a read
// budget smaller than the keys, one read walks at most the budget, the first reads publish what
// they found marked partial, and the sweep ends in a whole view that counts every key once.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "core/unix_time.h"
#include "fleet/fleet_stats.h"
#include "fleet/reader.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::fleet_sweep {
namespace {

using namespace lw::fleet;

constexpr int kKeys = 1'500;  // master 0's alone take two reads
constexpr int64_t kBatch = 100;
constexpr int64_t kBudget = 1'000;

class FleetSweepTest : public ::testing::Test {
 protected:
  FleetSweepTest() {
    // The same kKeys lock keys on every master, as a quorum of grants leaves them.
    for (int i = 0; i < cluster_.size(); ++i) {
      cluster_.Run(i, {"EVAL",
                       "for n = 1, tonumber(ARGV[1]) do "
                       "redis.call('SET', 'lock:sweep/' .. n, 'v', 'PX', 600000) end "
                       "return redis.status_reply('OK')",
                       "0", std::to_string(kKeys)});
    }
    ReaderSettings s;
    for (int i = 0; i < cluster_.size(); ++i) s.masters.push_back({"127.0.0.1", cluster_.port(i), "", "", {}});
    s.refresh = milliseconds(20);
    s.batch = kBatch;
    s.read_budget = kBudget;
    reader_ = std::make_unique<FleetReader>(s, &stats_);
    reader_->Start();
  }

  // The first view read after `after` (unix ms), waiting up to 10 s; null if none.
  std::shared_ptr<const FleetView> ViewAfter(int64_t after) {
    auto v = reader_->View(after, milliseconds(10'000));
    return v && v->read_unix_ms > after ? v : nullptr;
  }

  RedisCluster cluster_{3};
  stats::Registry registry_;
  FleetStats stats_{registry_};
  std::unique_ptr<FleetReader> reader_;
};

TEST_F(FleetSweepTest, AReadWalksAtMostItsBudgetAndTheSweepCountsEveryKeyOnce) {
  // The sweep walks kKeys keys on each of the 3 masters: several reads' budget.
  auto first = ViewAfter(0);
  ASSERT_NE(first, nullptr) << "no fleet read within 10 s";
  EXPECT_TRUE(first->partial);
  EXPECT_EQ(first->reads, 1);
  EXPECT_GE(first->keys_walked, static_cast<uint64_t>(kBudget));
  // A read stops at the SCAN call that spends its budget; a call walks about COUNT keys.
  EXPECT_LT(first->keys_walked, static_cast<uint64_t>(kBudget + 2 * kBatch));
  EXPECT_LT(first->locks_total, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(first->locks.size(), std::min<uint64_t>(first->locks_total, FleetReader::kKeptRows));
  const SweepProgress progress = reader_->Progress();
  EXPECT_TRUE(progress.active);
  EXPECT_EQ(progress.masters, 3u);
  EXPECT_GE(progress.reads, 1);

  std::shared_ptr<const FleetView> whole;
  int64_t after = first->read_unix_ms;
  Eventually(
      [&] {
        auto v = ViewAfter(after);
        if (!v) return false;
        after = v->read_unix_ms;
        if (v->partial) {
          // Each read adds at most its budget (and the SCAN call that spent it).
          EXPECT_LE(v->keys_walked,
                    static_cast<uint64_t>(v->reads) * static_cast<uint64_t>(kBudget + 2 * kBatch));
          return false;
        }
        whole = v;
        return true;
      },
      milliseconds(30'000));
  ASSERT_NE(whole, nullptr) << "no whole view within 30 s";
  EXPECT_TRUE(whole->complete);
  EXPECT_EQ(whole->locks_total, static_cast<uint64_t>(kKeys));  // each key once, of 3 masters
  EXPECT_EQ(whole->counts.locks, static_cast<uint64_t>(kKeys));
  EXPECT_GE(whole->keys_walked, static_cast<uint64_t>(3 * kKeys));
  EXPECT_GE(whole->reads, 3);
  EXPECT_LE(whole->read_started_unix_ms, first->read_unix_ms);
  EXPECT_EQ(whole->locks.size(), FleetReader::kKeptRows);

  // Once a whole view is out, a sweep under way publishes nothing partial: the next view is
  // the next whole one.
  auto next = ViewAfter(whole->read_unix_ms);
  ASSERT_NE(next, nullptr) << "no second whole view within 10 s";
  EXPECT_FALSE(next->partial);
  EXPECT_EQ(next->locks_total, static_cast<uint64_t>(kKeys));
  EXPECT_GT(next->read_started_unix_ms, whole->read_unix_ms - 1);
}

}  // namespace
}  // namespace lw::test::fleet_sweep
