// The fleet's wait-for graph (fleet/wait_graph.h) on crafted view rows: a deadlock across two
// agents, a waiter that is not part of it, a three-actor cycle, a semaphore's holders, a
// self-deadlock, and what the graph must not invent a cycle from.

#include "fleet/wait_graph.h"

#include "fleet/view.h"

#include <gtest/gtest.h>

namespace lw::fleet::wait_graph_test {
namespace {

// A row: `resource` held on a quorum by pid `pid` through agent `agent`.
FleetLock Held(const std::string& resource, const std::string& agent, int pid,
               bool quorum = true) {
  FleetLock row;
  row.resource = resource;
  row.agent_id = agent;
  row.quorum = quorum;
  Hold hold;
  hold.resource = resource;
  hold.holder.pid = pid;
  row.detail = hold;
  return row;
}

// `row` gains a waiter: pid `pid` through agent `agent`, for row's resource, waiting `ms`.
void Waits(FleetLock& row, const std::string& agent, int pid, int64_t ms = 1000) {
  FleetWaiter w;
  w.agent_id = agent;
  w.detail.resource = row.resource;
  w.detail.pid = pid;
  w.waited_ms = ms;
  row.waiters.push_back(w);
}

Actor A(const std::string& agent, int pid) { return Actor{agent, pid}; }

TEST(WaitGraph, TwoProcessesOnTwoAgentsWaitingForEachOtherAreOneDeadlock) {
  FleetLock r1 = Held("r1", "agent-a", 10);
  FleetLock r2 = Held("r2", "agent-b", 20);
  Waits(r2, "agent-a", 10, 3000);  // 10 holds r1, waits for r2
  Waits(r1, "agent-b", 20, 2000);  // 20 holds r2, waits for r1
  Waits(r1, "agent-c", 30, 5000);  // 30 only waits: behind the deadlock, not in it
  const WaitGraph g = BuildWaitGraph({r1, r2});
  ASSERT_EQ(g.edges.size(), 3u);
  ASSERT_EQ(g.deadlocks.size(), 1u);
  const Deadlock& d = g.deadlocks[0];
  EXPECT_EQ(d.actors, (std::vector<Actor>{A("agent-a", 10), A("agent-b", 20)}));
  EXPECT_EQ(d.cycle, (std::vector<Actor>{A("agent-a", 10), A("agent-b", 20)}));
  ASSERT_EQ(d.edges.size(), 2u);
  EXPECT_EQ(d.edges[0].resource, "r2");  // agent-a's 10 waits for r2, which 20 holds
  EXPECT_EQ(d.edges[1].resource, "r1");
  EXPECT_EQ(d.oldest_wait_ms, 3000);
}

TEST(WaitGraph, ThreeActorsInACircle) {
  FleetLock r1 = Held("r1", "a", 1);
  FleetLock r2 = Held("r2", "b", 2);
  FleetLock r3 = Held("r3", "c", 3);
  Waits(r2, "a", 1);
  Waits(r3, "b", 2);
  Waits(r1, "c", 3);
  const WaitGraph g = BuildWaitGraph({r1, r2, r3});
  ASSERT_EQ(g.deadlocks.size(), 1u);
  EXPECT_EQ(g.deadlocks[0].cycle, (std::vector<Actor>{A("a", 1), A("b", 2), A("c", 3)}));
}

TEST(WaitGraph, AWaiterForASemaphoreWaitsForEveryHolderOfItsPermits) {
  // s: permits held by 1 and 2; 3 waits for s; 1 waits for r, which 3 holds: 1 and 3 are
  // deadlocked, 2 is not (it waits for nobody).
  FleetLock s1 = Held("s", "a", 1);
  FleetLock s2 = Held("s", "b", 2);
  FleetLock r = Held("r", "c", 3);
  Waits(s1, "c", 3);
  Waits(r, "a", 1);
  const WaitGraph g = BuildWaitGraph({s1, s2, r});
  ASSERT_EQ(g.deadlocks.size(), 1u);
  EXPECT_EQ(g.deadlocks[0].actors, (std::vector<Actor>{A("a", 1), A("c", 3)}));
  const auto& holders = g.edges[0].holders;  // 3's wait for s
  EXPECT_EQ(holders, (std::vector<Actor>{A("a", 1), A("b", 2)}));
}

// One thread of a process waiting for a lock another of its threads holds is contention, not a
// deadlock (the agent answers a connection that asks again for what it holds itself at once).
TEST(WaitGraph, AProcessWaitingForWhatItHoldsItselfIsNoEdge) {
  FleetLock r = Held("r", "a", 7);
  Waits(r, "a", 7);
  const WaitGraph g = BuildWaitGraph({r});
  EXPECT_TRUE(g.deadlocks.empty());
  ASSERT_EQ(g.edges.size(), 1u);
  EXPECT_TRUE(g.edges[0].holders.empty());
}

TEST(WaitGraph, NoCycleFromWhatTheViewDoesNotKnow) {
  // The same two processes as the first test, but r2's holder is not known (no report) and r1
  // is short of a quorum: neither holds anything the graph can count.
  FleetLock r1 = Held("r1", "agent-a", 10, /*quorum=*/false);
  FleetLock r2 = Held("r2", "agent-b", 20);
  r2.detail.reset();
  Waits(r2, "agent-a", 10);
  Waits(r1, "agent-b", 20);
  EXPECT_TRUE(BuildWaitGraph({r1, r2}).deadlocks.empty());
  // A waiter of unknown pid adds no edge.
  FleetLock r3 = Held("r3", "a", 1);
  Waits(r3, "a", -1);
  EXPECT_TRUE(BuildWaitGraph({r3}).edges.empty());
  // The same pid on two agents is two processes (two hosts): no cycle.
  FleetLock x = Held("x", "a", 5);
  FleetLock y = Held("y", "b", 5);
  Waits(y, "a", 5);
  EXPECT_TRUE(BuildWaitGraph({x, y}).deadlocks.empty());
}

TEST(WaitGraph, TwoSeparateDeadlocksAreReportedApartInActorOrder) {
  FleetLock p = Held("p", "z", 1);
  FleetLock q = Held("q", "z", 2);
  Waits(q, "z", 1);
  Waits(p, "z", 2);
  FleetLock m = Held("m", "a", 1);
  FleetLock n = Held("n", "a", 2);
  Waits(n, "a", 1);
  Waits(m, "a", 2);
  const WaitGraph g = BuildWaitGraph({p, q, m, n});
  ASSERT_EQ(g.deadlocks.size(), 2u);
  EXPECT_EQ(g.deadlocks[0].actors.front(), A("a", 1));
  EXPECT_EQ(g.deadlocks[1].actors.front(), A("z", 1));
}

TEST(WaitGraph, ALongChainWithoutACycleIsNoDeadlockAndNeedsNoRecursion) {
  // 100,000 actors, each waiting for the next one's resource: iterative, linear.
  std::vector<FleetLock> rows;
  const int n = 100'000;
  for (int i = 0; i < n; ++i) rows.push_back(Held("r" + std::to_string(i), "a", i));
  for (int i = 0; i + 1 < n; ++i) Waits(rows[static_cast<size_t>(i) + 1], "a", i);
  const WaitGraph g = BuildWaitGraph(rows);
  EXPECT_EQ(g.edges.size(), static_cast<size_t>(n - 1));
  EXPECT_TRUE(g.deadlocks.empty());
  // Closing the chain makes it one deadlock of every actor.
  Waits(rows[0], "a", n - 1);
  EXPECT_EQ(BuildWaitGraph(rows).deadlocks.at(0).actors.size(), static_cast<size_t>(n));
}

TEST(WaitGraph, AHoldYoungerThanTheWaitersReportIsNoEdge) {
  const std::vector<HoldSeen> holding = {{"r1", A("a", 1), 100}, {"r2", A("b", 2), 300}};
  // b's report (at 250) lists 2 waiting for r1, held by 1 since 100: an edge. a's report (at
  // 250) lists 1 waiting for r2, held by 2 only since 300: 1 may have been granted r2 since.
  const WaitGraph stale = BuildWaitGraph(holding, {{"r2", A("a", 1), 50, 250},
                                                   {"r1", A("b", 2), 50, 250}});
  EXPECT_TRUE(stale.deadlocks.empty());
  ASSERT_EQ(stale.edges.size(), 2u);
  EXPECT_TRUE(stale.edges[0].holders.empty());
  const WaitGraph fresh = BuildWaitGraph(holding, {{"r2", A("a", 1), 50, 350},
                                                   {"r1", A("b", 2), 50, 250}});
  ASSERT_EQ(fresh.deadlocks.size(), 1u) << "a's report at 350 saw 2's hold of r2";
}

TEST(WaitGraph, ADeadlockCountsOnceTwoReadsInARowFoundTheSameActors) {
  Deadlock ab;
  ab.actors = {A("a", 1), A("b", 2)};
  Deadlock cd;
  cd.actors = {A("c", 3), A("d", 4)};
  std::set<std::vector<Actor>> seen;
  EXPECT_TRUE(Confirmed({ab}, seen).empty()) << "one read is not enough";
  const auto second = Confirmed({ab, cd}, seen);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].actors, ab.actors);
  EXPECT_EQ(Confirmed({cd}, seen).size(), 1u);
  EXPECT_TRUE(Confirmed({ab}, seen).empty()) << "ab was gone from the read before";
}

}  // namespace
}  // namespace lw::fleet::wait_graph_test
