// Fair turns across agents (docs/safety.md, "Fair turns"): an agent whose exclusive acquire is
// refused queues on the masters, and a holder's release leaves the lock reserved for the agent
// whose waiter came first. Real agents over 3 real masters.

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "core/lock_kind.h"
#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::turns {
namespace {

using nlohmann::json;

const std::string kQueue = QueueKey("lock:", "r");
const std::string kChannel = "lockwarden:released:lock:r";
constexpr int kWaitMs = 40'000;  // longer than anything here may take, shorter than a call

// Only a release announcement wakes such an agent's waiter: its retry is 20 s away.
std::vector<std::string> NoRetry() {
  return {"--retry-delay-ms", "20000", "--retry-jitter-ms", "0"};
}

// The order in which waiters were granted: each records its place once granted.
struct Order {
  std::atomic<int> next{0};
};

struct Turn {
  json reply;
  int place = -1;  // 0 for the first granted
};

// A client of `agent` waits for "r", notes its place when granted, holds it until `hold` is
// ready (at once when it is already), then releases.
std::future<Turn> WaitAndRelease(const AgentProcess& agent, Order& order,
                                 std::shared_future<void> hold = {}) {
  return std::async(std::launch::async, [&agent, &order, hold] {
    auto c = agent.Connect();
    Turn t;
    t.reply = c.Acquire("r", 30'000, kWaitMs);
    if (!t.reply.value("ok", false)) return t;
    t.place = order.next++;
    if (hold.valid()) hold.wait();
    c.Release("r", t.reply["token"]);
    return t;
  });
}

// The agents queued for "r" on master i (the queue's members: each agent's value prefix).
std::vector<std::string> Queued(const RedisCluster& cluster, int i) {
  std::vector<std::string> out;
  for (const auto& [member, score] : cluster.ZRange(i, kQueue)) out.push_back(member);
  return out;
}

bool QueuedEverywhere(const RedisCluster& cluster, size_t agents) {
  for (int i = 0; i < cluster.size(); ++i) {
    if (Queued(cluster, i).size() != agents) return false;
  }
  return true;
}

bool Listening(const RedisCluster& cluster) {
  for (int i = 0; i < cluster.size(); ++i) {
    if (cluster.NumSub(i, kChannel) < 1) return false;
  }
  return true;
}

bool NoQueueLeft(const RedisCluster& cluster) {
  for (int i = 0; i < cluster.size(); ++i) {
    if (cluster.Pttl(i, kQueue) != -2 || cluster.Pttl(i, QueueAliveKey("lock:", "r")) != -2) {
      return false;
    }
  }
  return true;
}

// Acquires of `agent` queued there (its waiters gauge), or -1 when unknown.
double LocalWaiters(const AgentProcess& agent) {
  return MetricNow(agent.admin_port(), "lockwarden_waiters");
}

class TurnsTest : public ::testing::Test {
 protected:
  // a's holder holds "r"; a waiter of b queues on every master; then a second waiter of a
  // comes. Returns the holder's client and token.
  std::pair<lw::client::Client, std::string> HeldWithRemoteThenLocalWaiter(
      const AgentProcess& a, const AgentProcess& b, Order& order, std::future<Turn>* remote,
      std::future<Turn>* local) {
    auto holder = a.Connect();
    const json held = holder.Acquire("r", 30'000, 0);
    EXPECT_TRUE(held.value("ok", false)) << held.dump();
    *remote = WaitAndRelease(b, order);
    EXPECT_TRUE(Eventually([&] { return QueuedEverywhere(cluster_, 1); }, milliseconds(10'000)))
        << "b's waiter never queued on the masters\n" << b.Log();
    *local = WaitAndRelease(a, order);
    EXPECT_TRUE(Eventually([&] { return LocalWaiters(a) >= 1; }, milliseconds(10'000)))
        << "a's second waiter never queued";
    return {std::move(holder), held.value("token", "")};
  }

  RedisCluster cluster_{3};
};

TEST_F(TurnsTest, AWaiterOnAnotherAgentWhoCameFirstGetsTheLockBeforeTheHoldersNextWaiter) {
  // a's hand-off window (its retry delay and jitter: 1 ms) is over long before a releases: b's
  // waiter queues on the masters in between, which alone takes longer.
  AgentProcess a(cluster_, {"--retry-delay-ms", "1", "--retry-jitter-ms", "0"});
  AgentProcess b(cluster_, NoRetry());
  Order order;
  std::future<Turn> remote, local;
  auto [holder, token] = HeldWithRemoteThenLocalWaiter(a, b, order, &remote, &local);
  ASSERT_TRUE(Eventually([&] { return Listening(cluster_); }, milliseconds(10'000)));

  ASSERT_TRUE(holder.Release("r", token).value("ok", false));
  const Turn r = remote.get();
  const Turn l = local.get();
  ASSERT_TRUE(r.reply.value("ok", false)) << r.reply.dump() << b.Log();
  ASSERT_TRUE(l.reply.value("ok", false)) << l.reply.dump() << a.Log();
  // b's waiter came first: it is served first, though a's was next in a's own queue and b only
  // tries when a release is announced.
  EXPECT_EQ(r.place, 0);
  EXPECT_EQ(l.place, 1);
  // a did not hand the lock to its own next waiter, though it could have (same ttl, time left).
  EXPECT_EQ(MetricNow(a.admin_port(), "lockwarden_handoffs_in_turn_total"), 1);
  EXPECT_EQ(MetricNow(a.admin_port(), "lockwarden_local_handoffs_total"), 0);
  // Each agent left the queue once granted.
  EXPECT_TRUE(Eventually([&] { return NoQueueLeft(cluster_); }, milliseconds(10'000)));
}

TEST_F(TurnsTest, TheHoldersNextWaiterWhoCameFirstKeepsItsTurn) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_, NoRetry());
  Order order;
  auto holder = a.Connect();
  const json held = holder.Acquire("r", 30'000, 0);
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  std::future<Turn> local = WaitAndRelease(a, order);
  ASSERT_TRUE(Eventually([&] { return LocalWaiters(a) >= 1; }, milliseconds(10'000)));
  std::future<Turn> remote = WaitAndRelease(b, order);
  ASSERT_TRUE(Eventually([&] { return QueuedEverywhere(cluster_, 1); }, milliseconds(10'000)))
      << b.Log();
  ASSERT_TRUE(Eventually([&] { return Listening(cluster_); }, milliseconds(10'000)));

  ASSERT_TRUE(holder.Release("r", held["token"]).value("ok", false));
  const Turn l = local.get();
  const Turn r = remote.get();
  ASSERT_TRUE(l.reply.value("ok", false)) << l.reply.dump() << a.Log();
  ASSERT_TRUE(r.reply.value("ok", false)) << r.reply.dump() << b.Log();
  // a's waiter came first: the release kept the lock for it (reserved for a, so b's claim
  // could not take it in between); its release then left it to b.
  EXPECT_EQ(l.place, 0);
  EXPECT_EQ(r.place, 1);
  EXPECT_TRUE(Eventually([&] { return NoQueueLeft(cluster_); }, milliseconds(10'000)));
}

// b retries only every 20 s, so its queue entry would live 41 s (twice its retry delay and node
// timeout) unless b took it out: gone within 10 s, b took it out.
TEST_F(TurnsTest, AWaiterThatGivesUpTakesItsAgentOutOfTheQueue) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_, NoRetry());
  auto holder = a.Connect();
  const json held = holder.Acquire("r", 30'000, 0);
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  {
    auto waiter = b.Connect();
    auto waiting = std::async(std::launch::async, [&] { return waiter.Acquire("r", 30'000, 2'000); });
    ASSERT_TRUE(Eventually([&] { return QueuedEverywhere(cluster_, 1); }, milliseconds(10'000)))
        << b.Log();
    EXPECT_EQ(waiting.get()["error"], "timeout");
  }
  EXPECT_TRUE(Eventually([&] { return QueuedEverywhere(cluster_, 0); }, milliseconds(10'000)));
  // So the release frees the key rather than reserving it for nobody.
  ASSERT_TRUE(holder.Release("r", held["token"]).value("ok", false));
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey("lock:r") == 0; },
                         milliseconds(10'000)));
}

TEST_F(TurnsTest, AWaiterWhoseProcessIsKilledTakesItsAgentOutOfTheQueue) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_, NoRetry());
  auto holder = a.Connect();
  const json held = holder.Acquire("r", 30'000, 0);
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  // `lockwarden lock` waiting through b, killed while it waits: b sees its socket close.
  const std::string out = b.dir() + "/lock.out";
  const pid_t waiter = SpawnTestProcess(
      {LockwardenBinary(), "lock", "--socket", b.socket_path(), "--wait", "30s", "r", "--", "true"},
      out);
  ASSERT_TRUE(Eventually([&] { return QueuedEverywhere(cluster_, 1); }, milliseconds(10'000)))
      << b.Log() << ReadFile(out);
  kill(waiter, SIGKILL);
  EXPECT_EQ(WaitChild(waiter, milliseconds(10'000)), 128 + SIGKILL);
  EXPECT_TRUE(Eventually([&] { return QueuedEverywhere(cluster_, 0); }, milliseconds(10'000)))
      << b.Log();
  ASSERT_TRUE(holder.Release("r", held["token"]).value("ok", false));
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey("lock:r") == 0; },
                         milliseconds(10'000)));
}

TEST_F(TurnsTest, ADeadAgentsEntryHoldsTheLockBackOnlyUntilItsReservationEnds) {
  AgentProcess a(cluster_);
  auto b = std::make_unique<AgentProcess>(cluster_);
  Order order;
  std::future<Turn> remote, local;
  auto [holder, token] = HeldWithRemoteThenLocalWaiter(a, *b, order, &remote, &local);
  const std::string dead = Queued(cluster_, 0).at(0);
  b->Signal(SIGKILL);
  ASSERT_NE(b->WaitExit(milliseconds(10'000)), -1);

  // The release reserves the lock for the dead agent, whose waiter came first; the reservation
  // ends unclaimed, and a's waiter gets the lock.
  ASSERT_TRUE(holder.Release("r", token).value("ok", false));
  const Turn l = local.get();
  ASSERT_TRUE(l.reply.value("ok", false)) << l.reply.dump() << a.Log();
  EXPECT_EQ(l.place, 0);
  // The dead agent's entry never outlives its ttl: the queue's keys go with it.
  EXPECT_TRUE(Eventually([&] { return NoQueueLeft(cluster_); }, milliseconds(20'000)))
      << "queue still holds " << dead;
  remote.wait();  // its client saw the agent die
}

TEST_F(TurnsTest, LocalFirstHandsTheLockToTheHoldersNextWaiterAndNeverQueues) {
  const std::vector<std::string> local_first = {"--local-first", "true"};
  AgentProcess a(cluster_, local_first);
  std::vector<std::string> slow = NoRetry();
  slow.insert(slow.end(), local_first.begin(), local_first.end());
  AgentProcess b(cluster_, slow);
  Order order;
  auto holder = a.Connect();
  const json held = holder.Acquire("r", 30'000, 0);
  ASSERT_TRUE(held.value("ok", false)) << held.dump();
  std::promise<void> let_go;
  std::future<Turn> remote = WaitAndRelease(b, order);
  ASSERT_TRUE(Eventually([&] { return Listening(cluster_); }, milliseconds(10'000))) << b.Log();
  std::future<Turn> local = WaitAndRelease(a, order, let_go.get_future().share());
  ASSERT_TRUE(Eventually([&] { return LocalWaiters(a) >= 1; }, milliseconds(10'000)));

  ASSERT_TRUE(holder.Release("r", held["token"]).value("ok", false));
  // a's next waiter has it (handed over, no round trip) while b's still waits.
  ASSERT_TRUE(Eventually([&] { return order.next.load() == 1; }, milliseconds(10'000)));
  EXPECT_EQ(QueuedEverywhere(cluster_, 0), true);
  EXPECT_EQ(MetricNow(a.admin_port(), "lockwarden_local_handoffs_total"), 1);
  let_go.set_value();
  const Turn l = local.get();
  const Turn r = remote.get();
  EXPECT_EQ(l.place, 0);
  EXPECT_EQ(r.place, 1) << r.reply.dump();
}

}  // namespace
}  // namespace lw::test::turns
