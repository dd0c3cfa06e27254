// fleet/view ViewBuilder: a read handed over in batches joins as the whole read at once, and a
// bounded builder keeps each prefix's first rows while counting every row.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/key_parts.h"
#include "fleet/view.h"

namespace lw::fleet::fleet_view_builder_test {
namespace {

constexpr int64_t kNow = 1'700'000'100'000;
constexpr int64_t kStuckAfter = 300'000;
const std::string kA = "aaaaaaaaaaaaaaaa";
const std::string kGone = "dddddddddddddddd";

std::vector<MasterRead> Masters(int n) {
  std::vector<MasterRead> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)].master = "127.0.0.1:" + std::to_string(7000 + i);
    out[static_cast<size_t>(i)].ok = true;
  }
  return out;
}

void Copy(std::vector<MasterRead>& masters, const std::string& key, const std::string& value,
          int64_t pttl, std::vector<int> on) {
  for (int m : on) masters[static_cast<size_t>(m)].copies.push_back({key, value, pttl});
}

// Agent A on every master, holding "job-<i>" for i in [0, holds) (held i s: the higher the
// longer), "stuck" (not renewing, 10 min ttl) and two of the four permits of "pool", and a
// waiter for "job-1"; "orphan" is held by an agent that is gone; each key on all three masters.
std::vector<MasterRead> Fleet(int holds) {
  std::vector<MasterRead> masters = Masters(3);
  AgentRecord a;
  a.id = kA;
  a.name = "alpha";
  a.heartbeat_unix_ms = kNow;
  HolderReport report;
  for (int i = 0; i < holds; ++i) {
    Hold h;
    h.resource = "job-" + std::to_string(i);
    h.held_since_unix_ms = kNow - 1'000 * i;
    h.ttl_ms = 30'000;
    h.renew = true;
    report.locks.push_back(h);
  }
  Hold stuck;
  stuck.resource = "stuck";
  stuck.held_since_unix_ms = kNow - 500;
  stuck.ttl_ms = 600'000;
  report.locks.push_back(stuck);
  report.waiters.push_back({"job-1", 42, 1000, "wait", kNow - 2'000});
  for (MasterRead& m : masters) {
    m.agents.push_back(a);
    m.reports.emplace_back(kA, report);
  }
  for (int i = 0; i < holds; ++i) {
    Copy(masters, "lock:job-" + std::to_string(i), kA + ":t" + std::to_string(i), 20'000,
         {0, 1, 2});
  }
  Copy(masters, "lock:stuck", kA + ":ts", 500'000, {0, 1, 2});
  Copy(masters, "lock:orphan", kGone + ":to", 20'000, {0, 1, 2});
  Copy(masters, "lock:pool", LockShape{LockKind::kSemaphore, 4}.Marker(), 30'000, {0, 1, 2});
  Copy(masters, PermitKey("lock:", "pool", 0), kA + ":p0", 20'000, {0, 1, 2});
  Copy(masters, PermitKey("lock:", "pool", 2), kA + ":p2", 20'000, {0, 1, 2});
  return masters;
}

ViewSettings Settings(std::vector<std::string> asks = {""}, size_t keep = SIZE_MAX) {
  ViewSettings s;
  s.key_prefix = "lock:";
  s.stuck_after_ms = kStuckAfter;
  s.now_unix_ms = kNow;
  s.masters = 3;
  s.asks = std::move(asks);
  s.keep = keep;
  return s;
}

// The read handed over one key at a time (every master's copies of that key together); with
// `part`, a Snapshot taken after the first `part_keys` keys goes there.
FleetView InBatches(const std::vector<MasterRead>& read, const ViewSettings& settings,
                    FleetView* part = nullptr, size_t part_keys = 0) {
  ViewBuilder builder(settings);
  builder.AddRegistry(read);
  std::vector<std::string> keys;
  for (const MasterRead::Copy& c : read[0].copies) keys.push_back(c.key);
  for (size_t k = 0; k < keys.size(); ++k) {
    if (part != nullptr && k == part_keys) *part = builder.Snapshot(Masters(3), 0.25);
    std::vector<MasterRead> batch = Masters(3);
    for (size_t m = 0; m < read.size(); ++m) {
      for (const MasterRead::Copy& c : read[m].copies) {
        if (c.key == keys[k]) batch[m].copies.push_back(c);
      }
    }
    builder.AddCopies(batch);
  }
  return builder.Finish(Masters(3), 0.5);
}

std::vector<std::string> Resources(const FleetView& v) {
  std::vector<std::string> out;
  for (const FleetLock& l : v.locks) out.push_back(l.resource);
  return out;
}

TEST(FleetViewBuilder, ABatchedReadJoinsAsTheWholeReadAtOnce) {
  const std::vector<MasterRead> read = Fleet(5);
  ViewInputs whole;
  whole.masters = read;
  whole.key_prefix = "lock:";
  whole.stuck_after_ms = kStuckAfter;
  whole.now_unix_ms = kNow;
  const FleetView all = BuildView(whole);
  const FleetView batched = InBatches(read, Settings());
  EXPECT_EQ(Resources(batched), Resources(all));
  ASSERT_EQ(batched.locks.size(), 9u);  // 5 jobs, stuck, orphan, 2 permits
  EXPECT_EQ(batched.locks[0].resource, "stuck");
  EXPECT_EQ(batched.keys, all.keys);
  EXPECT_EQ(batched.locks_total, 9u);
  const FleetResource* pool = ResourceOf(batched, "pool");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->permits, 4) << "the marker, read in another batch than the permits";
  EXPECT_EQ(pool->permits_held, 2);
  for (const FleetLock& l : batched.locks) {
    if (l.resource == "pool") {
      EXPECT_EQ(l.permits, 4);
    }
    if (l.resource == "job-1") {
      EXPECT_EQ(l.waiters.size(), 1u);
    }
  }
  EXPECT_TRUE(batched.waiting_unheld.empty());
  EXPECT_EQ(batched.counts.locks, 9u);
  EXPECT_EQ(batched.counts.gone, 1u);
  EXPECT_EQ(batched.counts.stuck, 1u);
  EXPECT_TRUE(RowsComplete(batched, "anything"));
}

TEST(FleetViewBuilder, KeepsEachAskedPrefixsFirstRowsAndCountsEveryRow) {
  const FleetView v = InBatches(Fleet(50), Settings({"", "pool"}, 3));
  // The first 3 of all (stuck, then the longest held jobs) and both of "pool".
  EXPECT_EQ(Resources(v), (std::vector<std::string>{"stuck", "job-49", "job-48", "pool", "pool"}));
  EXPECT_EQ(v.locks_total, 54u);
  EXPECT_EQ(v.counts.locks, 54u);
  EXPECT_EQ(v.counts.stuck, 1u);
  EXPECT_EQ(v.counts.gone, 1u) << "the orphan is counted although not kept";
  EXPECT_TRUE(RowsComplete(v, ""));
  EXPECT_TRUE(RowsComplete(v, "pool"));
  EXPECT_FALSE(RowsComplete(v, "job-1"));
  EXPECT_EQ(v.kept_for, (std::vector<std::string>{"", "pool"}));
  // job-1's waiter: its resource is held (by a row not kept), so it is not between holders.
  EXPECT_TRUE(v.waiting_unheld.empty());
  const FleetResource* pool = ResourceOf(v, "pool");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->permits_held, 2);
}

TEST(FleetViewBuilder, PermitsHeldCountRowsThatWereNotKept) {
  // Only the first row of "pool" is kept for "": the resource still counts both permits.
  const FleetView v = InBatches(Fleet(0), Settings({""}, 2));
  EXPECT_EQ(Resources(v), (std::vector<std::string>{"stuck", "orphan"}));
  EXPECT_EQ(v.locks_total, 4u);
  const FleetView pools = InBatches(Fleet(0), Settings({"", "pool"}, 1));
  const FleetResource* pool = ResourceOf(pools, "pool");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->permits_held, 2) << "one row kept, two held";
}

TEST(FleetViewBuilder, ASnapshotShowsTheRowsSoFarAndLeavesTheBuilderAsItWas) {
  const std::vector<MasterRead> read = Fleet(5);
  FleetView part;
  const FleetView whole = InBatches(read, Settings({""}, 3), &part, 3);
  // job-0..job-2 so far (the first keys handed over), the 3 kept of them.
  EXPECT_EQ(part.locks_total, 3u);
  EXPECT_EQ(Resources(part), (std::vector<std::string>{"job-2", "job-1", "job-0"}));
  EXPECT_EQ(part.counts.locks, 3u);
  // The whole read as if no snapshot had been taken.
  const FleetView plain = InBatches(read, Settings({""}, 3));
  EXPECT_EQ(Resources(whole), Resources(plain));
  EXPECT_EQ(whole.locks_total, 9u);
  EXPECT_EQ(whole.counts.locks, plain.counts.locks);
  EXPECT_EQ(whole.counts.stuck, 1u);
  EXPECT_EQ(Resources(whole), (std::vector<std::string>{"stuck", "job-4", "job-3"}));
}

}  // namespace
}  // namespace lw::fleet::fleet_view_builder_test
