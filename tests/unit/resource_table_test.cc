// ResourceTable's bounded views against a walk of every resource (the oracle): holds installed
// and taken, waiters queued, popped, taken, cancelled and dropped in seeded random orders.
// ListedLocks and AllWaiters must list exactly what a full walk and sort would, and the counts
// must match the queues.

#include "locking/resource_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

namespace lw::resource_table_test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kStuckAfterMs = 50'000;

// A listed hold: whether it is stuck, its resource and serial.
using Listed = std::tuple<bool, std::string, uint64_t>;

class Tables {
 public:
  Tables() : table_("lockwarden:", "lockwarden:fence:", "agent:", nullptr, kStuckAfterMs) {}

  // The `limit` holds listed first as of `now`, from a walk of every resource: the stuck (held
  // over kStuckAfterMs, or not renewing with a longer ttl), then the others, each by (acquired,
  // name, serial).
  std::vector<Listed> OracleListed(size_t limit, Clock::time_point now) {
    std::vector<std::tuple<bool, Clock::time_point, std::string, uint64_t>> all;
    table_.ForEach([&](const std::string& name, Resource& r) {
      for (const auto& h : r.holders) {
        const bool stuck = now - h->acquired > std::chrono::milliseconds(kStuckAfterMs) ||
                           (!h->renew && h->ttl_ms > kStuckAfterMs);
        all.emplace_back(!stuck, h->acquired, name, h->serial);
      }
    });
    std::sort(all.begin(), all.end());
    if (all.size() > limit) all.resize(limit);
    std::vector<Listed> out;
    for (const auto& [not_stuck, at, name, serial] : all) out.emplace_back(!not_stuck, name, serial);
    return out;
  }
  // What ListedLocks lists, with each view's stuck state read from the view itself; checks that
  // the grants are the listed holds'.
  std::vector<Listed> TableListed(size_t limit, Clock::time_point now) {
    std::vector<Listed> out;
    ResourceTable::GrantPairs grants;
    const std::vector<LockView> views = table_.ListedLocks(limit, now, &grants);
    EXPECT_EQ(grants.size(), views.size());
    for (size_t i = 0; i < views.size(); ++i) {
      const LockView& v = views[i];
      const bool stuck = v.held_ms > kStuckAfterMs || (!v.renew && v.ttl_ms > kStuckAfterMs);
      out.emplace_back(stuck, v.resource, v.hold);
      if (i < grants.size()) {
        EXPECT_EQ(grants[i].first, v.key);
        EXPECT_TRUE(table_.FindGrant(grants[i].first, grants[i].second)) << v.resource;
      }
    }
    return out;
  }
  // The `limit` oldest waiters still waiting, by (requested, id), from a walk: {name, session}.
  std::vector<std::pair<std::string, SessionId>> OracleWaiters(size_t limit) {
    std::vector<std::tuple<Clock::time_point, uint64_t, std::string, SessionId>> all;
    table_.ForEach([&](const std::string& name, Resource& r) {
      r.waiters.ForEachWaiting(
          [&](const Waiter& w) { all.emplace_back(w.requested, w.id, name, w.session); });
    });
    std::sort(all.begin(), all.end());
    if (all.size() > limit) all.resize(limit);
    std::vector<std::pair<std::string, SessionId>> out;
    for (const auto& [at, id, name, session] : all) out.emplace_back(name, session);
    return out;
  }
  std::vector<std::pair<std::string, SessionId>> Waiters(size_t limit) {
    std::vector<std::pair<std::string, SessionId>> out;
    for (const WaiterView& v : table_.AllWaiters(limit)) out.emplace_back(v.resource, v.session);
    return out;
  }
  size_t OracleWaiterCount() {
    size_t n = 0;
    table_.ForEach([&](const std::string&, Resource& r) { n += r.waiters.size(); });
    return n;
  }

  ResourceTable table_;
};

// One seeded run of `steps` random operations over `resources` names; checks the views after
// every `check_every` steps (a check walks and sorts everything: the oracle is the slow part).
void RunSeed(uint32_t seed, int steps, int resources, int check_every) {
  std::mt19937 rng(seed);
  Tables t;
  // Holds are acquired 105 s to 35 s before `now` (the time every view is asked at), 10 s
  // apart: those from before 50 s are stuck by age.
  const auto now = Clock::now();
  const auto base = now - std::chrono::seconds(105);
  uint64_t next_id = 1;
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  for (int step = 0; step < steps; ++step) {
    const std::string name = "r" + std::to_string(pick(resources));
    Resource& r = t.table_.Add(name, LockShape{});
    // Times collide on purpose (a few distinct values), so ties are broken by name and id.
    const auto at = base + std::chrono::seconds(10 * pick(8));
    switch (pick(7)) {
      case 0:
      case 1: {  // install a hold
        auto h = std::make_unique<Holder>();
        h->serial = next_id++;
        h->session = static_cast<SessionId>(1 + pick(5));
        h->acquired = at;
        h->valid_until = at + std::chrono::seconds(30);
        h->renew = pick(2) == 0;  // not renewing with a ttl over stuck_after: stuck however young
        h->ttl_ms = std::array<int64_t, 3>{1'000, 60'000, 600'000}[static_cast<size_t>(pick(3))];
        t.table_.Install(r, name, std::move(h));
        break;
      }
      case 2:  // take one of its holds
        if (!r.holders.empty()) {
          const Holder* which = r.holders[static_cast<size_t>(pick(static_cast<int>(r.holders.size())))].get();
          t.table_.Take(r, name, which);
        }
        break;
      case 3: {  // queue a waiter
        Waiter w;
        w.id = next_id++;
        w.session = static_cast<SessionId>(1 + pick(5));
        w.requested = at;
        r.waiters.Push(std::move(w));
        break;
      }
      case 4:  // the front is answered, or its attempt goes in flight and its session closes
        if (!r.waiters.empty()) {
          if (pick(2) == 0) {
            r.waiters.PopFront();
          } else {
            r.waiters.front().in_attempt = true;
            r.waiters.RemoveSession(r.waiters.front().session, [](const Waiter&) {});
          }
        }
        break;
      case 5:  // a waiter behind the front gives up; or the front's attempt ends
        if (r.waiters.size() > 1 && pick(2) == 0) {
          uint64_t id = 0;
          int i = 0, target = 1 + pick(static_cast<int>(r.waiters.size()) - 1);
          r.waiters.ForEachWaiting([&](const Waiter& w) {
            if (i++ == target) id = w.id;
          });
          if (id != 0) r.waiters.Take(id);
        } else if (!r.waiters.empty()) {
          r.waiters.front().in_attempt = false;
          r.waiters.DropCancelledFront([](const Waiter&) {});
        }
        break;
      case 6:  // everything waiting on it is cancelled
        if (pick(4) == 0) r.waiters.CancelAll([](Waiter&) {});
        break;
    }
    if (step % check_every != 0 && step != steps - 1) continue;
    for (size_t limit : {size_t{0}, size_t{1}, size_t{3}, size_t{10}, size_t{1000}}) {
      ASSERT_EQ(t.TableListed(limit, now), t.OracleListed(limit, now))
          << "seed " << seed << " step " << step;
      ASSERT_EQ(t.Waiters(limit), t.OracleWaiters(limit)) << "seed " << seed << " step " << step;
    }
    ASSERT_EQ(t.table_.waiters(), t.OracleWaiterCount()) << "seed " << seed << " step " << step;
  }
}

TEST(ResourceTableViewsTest, BoundedViewsListWhatAFullWalkWould) {
  for (uint32_t seed = 1; seed <= 10; ++seed) RunSeed(seed, 300, 6, 1);
}

TEST(ResourceTableViewsTest, ManyResourcesFewOperationsEach) {
  for (uint32_t seed = 100; seed <= 102; ++seed) RunSeed(seed, 2000, 300, 50);
}

}  // namespace
}  // namespace lw::resource_table_test
