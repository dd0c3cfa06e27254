// The presence probe against real masters: held / missing / other per master, unknown for a
// master that is dead or hung (and back once it returns), bounded Stop(), the per-round cap,
// and no rounds at all while nobody looks.

#include "scan/presence_probe.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::presence_probe {
namespace {

using Names = std::vector<std::string>;

const GrantList kGrants = {{"lock:a", "tok-a"}, {"lock:b", "tok-b"}, {"lock:c", "tok-c"}};
constexpr int64_t kPx = 60'000;
constexpr milliseconds kFast{20};  // probe period in these tests

int64_t UnixMsNow() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The report row of `key` as names, one per master; {"absent"} when the key is not reported.
Names Row(const std::shared_ptr<const PresenceReport>& report, const std::string& key) {
  if (!report) return {"no report"};
  auto it = report->keys.find(key);
  if (it == report->keys.end()) return {"absent"};
  Names names;
  for (KeyPresence p : it->second) names.emplace_back(PresenceName(p));
  return names;
}

// Connections master `port` has open besides the one asking; -1 when it does not answer.
int OtherClients(int port) {
  timeval timeout{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, timeout);
  if (c == nullptr || c->err) {
    if (c) redisFree(c);
    return -1;
  }
  redisSetTimeout(c, timeout);
  auto* reply = static_cast<redisReply*>(redisCommand(c, "CLIENT LIST"));
  int lines = -1;
  if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
    lines = static_cast<int>(std::count(reply->str, reply->str + reply->len, '\n'));
  }
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(c);
  return lines < 0 ? -1 : lines - 1;
}

// The report of a round that started after this call (as the web page would, it keeps the
// probe demanded while waiting). Round n+1 may have begun before the call; n+2 began after.
std::shared_ptr<const PresenceReport> NextReport(PresenceProbe& probe) {
  const uint64_t seen = probe.rounds();
  const bool done = Eventually(
      [&] {
        probe.Demand();
        return probe.rounds() >= seen + 2;
      },
      milliseconds(10'000));
  EXPECT_TRUE(done) << "no probe round completed within 10 s";
  return probe.Latest();
}

class PresenceProbeTest : public ::testing::Test {
 protected:
  std::vector<MasterAddress> Masters() const {
    std::vector<MasterAddress> masters;
    for (int i = 0; i < cluster_.size(); ++i) {
      MasterAddress address;
      address.host = "127.0.0.1";
      address.port = cluster_.port(i);
      masters.push_back(address);
    }
    return masters;
  }

  RedisCluster cluster_{3};
};

TEST_F(PresenceProbeTest, ShowsEachGrantPerMasterAndUnknownForADeadMasterUntilItReturns) {
  cluster_.Set(0, "lock:a", "tok-a", kPx);
  cluster_.Set(1, "lock:a", "tok-a", kPx);
  cluster_.Set(2, "lock:a", "someone-else", kPx);
  cluster_.Set(1, "lock:b", "tok-b", kPx);
  // lock:c is on no master.
  const int64_t before = UnixMsNow();
  PresenceProbe probe(
      Masters(), [] { return kGrants; }, kFast);
  probe.Start();
  probe.Demand();

  auto report = NextReport(probe);
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->keys.size(), 3u);
  EXPECT_EQ(Row(report, "lock:a"), (Names{"held", "held", "other"}));
  EXPECT_EQ(Row(report, "lock:b"), (Names{"missing", "held", "missing"}));
  EXPECT_EQ(Row(report, "lock:c"), (Names{"missing", "missing", "missing"}));
  EXPECT_GE(report->checked_unix_ms, before);

  cluster_.Kill(1);
  for (int round = 0; round < 2; ++round) {  // stays unknown, the others stay right
    const int64_t previous = report->checked_unix_ms;
    report = NextReport(probe);
    ASSERT_NE(report, nullptr);
    EXPECT_GT(report->checked_unix_ms, previous);
    EXPECT_EQ(Row(report, "lock:a"), (Names{"held", "unknown", "other"}));
    EXPECT_EQ(Row(report, "lock:b"), (Names{"missing", "unknown", "missing"}));
    EXPECT_EQ(Row(report, "lock:c"), (Names{"missing", "unknown", "missing"}));
  }

  // Back, empty (no persistence): the probe reconnects (at most once per second) and sees it.
  cluster_.Restart(1);
  EXPECT_TRUE(Eventually(
      [&] {
        probe.Demand();
        return Row(probe.Latest(), "lock:b")[1] == "missing";
      },
      milliseconds(15'000)))
      << "the restarted master was not probed again";
  report = probe.Latest();
  EXPECT_EQ(Row(report, "lock:a"), (Names{"held", "missing", "other"}));
  EXPECT_EQ(Row(report, "lock:b"), (Names{"missing", "missing", "missing"}));

  // Stop does not wait for the demand window (15 s from the last Demand) to run out.
  const auto stopping = SteadyClock::now();
  probe.Stop();
  EXPECT_LT(MsSince(stopping), PresenceProbe::kDemandWindow.count() / 2);
  probe.Stop();  // idempotent
}

TEST_F(PresenceProbeTest, AHungMasterIsUnknownAndNeitherBlocksCallersNorStop) {
  for (int i = 0; i < cluster_.size(); ++i) cluster_.Set(i, "lock:a", "tok-a", kPx);
  // Master 0 is probed first in a round, so a round that has begun is soon waiting on it.
  cluster_.Stop(0);  // accepts connections, answers nothing: every try costs a timeout
  std::atomic<uint64_t> rounds_started{0};  // grants() opens each round
  PresenceProbe probe(
      Masters(),
      [&] {
        ++rounds_started;
        return GrantList{{"lock:a", "tok-a"}};
      },
      kFast);
  probe.Start();
  probe.Demand();
  EXPECT_EQ(Row(NextReport(probe), "lock:a"), (Names{"unknown", "held", "held"}));

  cluster_.Cont(0);  // reconnected after the retry pause
  EXPECT_TRUE(Eventually(
      [&] {
        probe.Demand();
        return Row(probe.Latest(), "lock:a") == Names{"held", "held", "held"};
      },
      milliseconds(15'000)));

  // Hung again, this time on an open connection. A round that begins now waits up to the
  // command timeout (500 ms) on master 0; callers meanwhile get the last report. (How long a
  // call takes is not asserted: the command timeout is too short a yardstick on a loaded box.)
  cluster_.Stop(0);
  const uint64_t before = rounds_started.load();
  ASSERT_TRUE(Eventually([&] { return rounds_started.load() > before; }, milliseconds(15'000)));
  for (int i = 0; i < 1000; ++i) {
    probe.Demand();
    ASSERT_NE(probe.Latest(), nullptr);
  }
  // The command in flight finishes (its timeout), no further master is asked: Stop does not
  // wait for the demand window (15 s from the last Demand) to run out.
  const auto stopping = SteadyClock::now();
  probe.Stop();
  EXPECT_LT(MsSince(stopping), PresenceProbe::kDemandWindow.count() / 2);
}

TEST_F(PresenceProbeTest, SendsNothingWhileNobodyLooks) {
  std::atomic<uint64_t> grant_calls{0};
  PresenceProbe probe(
      Masters(),
      [&] {
        ++grant_calls;
        return kGrants;
      },
      milliseconds(10), /*demand_window=*/milliseconds(3'000));
  probe.Start();
  // Idle is a wait on Demand() and Stop() alone, with no timer: once the thread is in it,
  // nothing runs until one of them is called.
  ASSERT_TRUE(Eventually([&] { return probe.idle(); }, milliseconds(5'000)));
  EXPECT_EQ(probe.rounds(), 0u);
  EXPECT_EQ(probe.Latest(), nullptr);
  EXPECT_EQ(grant_calls.load(), 0u);

  probe.Demand();  // the first call probes at once
  ASSERT_TRUE(Eventually([&] { return probe.rounds() >= 1; }, milliseconds(5'000)));
  EXPECT_EQ(Row(probe.Latest(), "lock:a"), (Names{"missing", "missing", "missing"}));

  // While demanded (each check demands again: the window is 3 s from then), the probe keeps one
  // connection to each master.
  for (int i = 0; i < cluster_.size(); ++i) {
    probe.Demand();
    EXPECT_EQ(OtherClients(cluster_.port(i)), 1) << "master " << i;
  }

  // The window ends: idle again, having asked for the grants once per round and no more, and
  // with no connection left open.
  ASSERT_TRUE(Eventually([&] { return probe.idle(); }, milliseconds(15'000)));
  const uint64_t rounds = probe.rounds();
  EXPECT_GE(rounds, 2u) << "probing should continue through the demand window";
  EXPECT_EQ(grant_calls.load(), rounds);
  for (int i = 0; i < cluster_.size(); ++i) {
    EXPECT_TRUE(
        Eventually([&] { return OtherClients(cluster_.port(i)) == 0; }, milliseconds(5'000)))
        << "master " << i << " still has the probe's connection";
  }

  probe.Demand();  // a new window
  EXPECT_TRUE(Eventually([&] { return probe.rounds() > rounds; }, milliseconds(15'000)));
}

TEST_F(PresenceProbeTest, ChecksAtMostAThousandGrantsPerRound) {
  GrantList many;
  for (int i = 0; i <= 1000; ++i) {
    many.emplace_back("lock:k" + std::to_string(i), "t" + std::to_string(i));
  }
  cluster_.Set(0, "lock:k0", "t0", kPx);
  cluster_.Set(2, "lock:k999", "not-t999", kPx);
  PresenceProbe probe(
      Masters(), [&] { return many; }, kFast);
  probe.Start();
  probe.Demand();
  auto report = NextReport(probe);
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->keys.size(), PresenceProbe::kMaxGrantsPerRound);
  EXPECT_EQ(Row(report, "lock:k0"), (Names{"held", "missing", "missing"}));
  EXPECT_EQ(Row(report, "lock:k999"), (Names{"missing", "missing", "other"}));
  EXPECT_EQ(Row(report, "lock:k1000"), (Names{"absent"}));
}

}  // namespace
}  // namespace lw::test::presence_probe
