// Who blocks whom beyond a cycle (fleet/wait_graph.h): nested processes as one actor, blocking
// chains, the revoke proposed to end a deadlock, and what the admin API says of them
// (admin/wait_views.h); the agent's side of nesting (ActorPids).

#include <gtest/gtest.h>

#include "admin/wait_views.h"
#include "agent/fleet_member.h"
#include "fleet/wait_graph.h"

namespace lw::fleet::wait_chain_test {
namespace {

Actor A(const std::string& agent, int pid) { return Actor{agent, pid}; }

HoldSeen H(const std::string& resource, Actor holder, int pid = -1, std::string hold_id = "") {
  return HoldSeen{resource, std::move(holder), 0, pid, std::move(hold_id), "cmd"};
}

WaitSeen W(const std::string& resource, Actor waiter, int64_t waited_ms, int pid = -1) {
  return WaitSeen{resource, std::move(waiter), waited_ms, 1000, pid, "cmd"};
}

TEST(ActorPids, ANestedClientIsPartOfItsOutermostClientAncestor) {
  // 100 holds through the agent; its child's child 300 (through a shell, 200, no client) waits;
  // 400 is a client with no client ancestor; 500's parent 100 is a client, and so is 100's
  // parent 50: the outermost (50) is the actor.
  Peer outer{50, 0, 0, "", {1}};
  Peer lock{100, 0, 0, "", {50, 1}};
  Peer nested{300, 0, 0, "", {200, 100, 50}};
  Peer alone{400, 0, 0, "", {7}};
  EXPECT_EQ(ActorPids({&lock, &nested, &alone}), (std::vector<int>{100, 100, 400}));
  EXPECT_EQ(ActorPids({&outer, &lock, &nested}), (std::vector<int>{50, 50, 50}));
}

TEST(WaitGraphNesting, ANestedProcessWaitingForItsOuterActorsLockIsACycleOfOne) {
  // Actor 100 holds r (process 100); its nested 300 waits for r: the outer command waits for
  // the nested one, which waits for the outer's lock.
  const WaitGraph g = BuildWaitGraph({H("r", A("a", 100), 100, "h1")}, {W("r", A("a", 100), 5, 300)});
  ASSERT_EQ(g.deadlocks.size(), 1u);
  EXPECT_EQ(g.deadlocks[0].cycle, (std::vector<Actor>{A("a", 100)}));
  EXPECT_EQ(g.deadlocks[0].edges[0].pid, 300);
  // The same process (another thread of 100) waiting for it is contention, no edge.
  EXPECT_TRUE(BuildWaitGraph({H("r", A("a", 100), 100)}, {W("r", A("a", 100), 5, 100)})
                  .deadlocks.empty());
}

TEST(WaitGraphNesting, TwoNestedLocksAcrossAgentsDeadlockThroughTheirOuterActors) {
  // `lockwarden lock a -- lockwarden lock b` (outer 10 on agent x) against the same nested the
  // other way round (outer 20 on agent y): 10 holds a and its nested 11 waits for b; 20 holds b
  // and its nested 21 waits for a.
  const WaitGraph g = BuildWaitGraph(
      {H("a", A("x", 10), 10), H("b", A("y", 20), 20)},
      {W("b", A("x", 10), 300, 11), W("a", A("y", 20), 200, 21)});
  ASSERT_EQ(g.deadlocks.size(), 1u);
  EXPECT_EQ(g.deadlocks[0].actors, (std::vector<Actor>{A("x", 10), A("y", 20)}));
}

TEST(BlockingChain, FollowsWhatEachHolderWaitsForAndMarksTheCycle) {
  // 1 holds r and waits for s; 2 holds s and waits for t and u; 3 holds t (runs); 4 holds u and
  // waits for r (back to 1: a cycle).
  const WaitGraph g = BuildWaitGraph(
      {H("r", A("a", 1)), H("s", A("b", 2)), H("t", A("c", 3)), H("u", A("d", 4))},
      {W("s", A("a", 1), 10), W("t", A("b", 2), 20), W("u", A("b", 2), 30), W("r", A("d", 4), 40)});
  const auto chain = BlockingChain(g, A("a", 1));
  ASSERT_EQ(chain.size(), 4u);
  EXPECT_EQ(chain[0].depth, 0);
  EXPECT_EQ(chain[0].edge->resource, "s");
  EXPECT_EQ(chain[1].depth, 1);
  EXPECT_EQ(chain[1].edge->resource, "t");  // 2's first wait, then what 3 waits for (nothing)
  EXPECT_FALSE(chain[1].cycle);
  EXPECT_EQ(chain[2].edge->resource, "u");
  EXPECT_EQ(chain[3].depth, 2);
  EXPECT_EQ(chain[3].edge->resource, "r");  // 4 waits for 1's r: the chain closes
  EXPECT_TRUE(chain[3].cycle);
  EXPECT_TRUE(BlockingChain(g, A("c", 3)).empty()) << "3 waits for nothing";
  EXPECT_EQ(BlockingChain(g, A("a", 1), 2).size(), 2u) << "bounded";
}

TEST(WaitingBehind, ListsWhoWaitsForTheHolderAndWhoWaitsForThemMarkingTheCycle) {
  // 1 holds r; 2 and 3 wait for r; 2 holds s, which 4 waits for; 4 holds t, which 1 waits for.
  const WaitGraph g = BuildWaitGraph(
      {H("r", A("a", 1)), H("s", A("b", 2)), H("t", A("d", 4))},
      {W("r", A("b", 2), 10), W("r", A("c", 3), 20), W("s", A("d", 4), 30), W("t", A("a", 1), 40)});
  const auto behind = WaitingBehind(g, A("a", 1), "r");
  ASSERT_EQ(behind.size(), 4u);
  EXPECT_EQ(behind[0].edge->waiter, A("b", 2));
  EXPECT_EQ(behind[0].depth, 0);
  EXPECT_EQ(behind[1].edge->waiter, A("d", 4)) << "behind 2: the waiter for its s";
  EXPECT_EQ(behind[1].depth, 1);
  EXPECT_EQ(behind[2].edge->waiter, A("a", 1)) << "behind 4: the holder itself";
  EXPECT_TRUE(behind[2].cycle);
  EXPECT_EQ(behind[3].edge->waiter, A("c", 3));
  EXPECT_EQ(behind[3].depth, 0);
  EXPECT_TRUE(WaitingBehind(g, A("c", 3), "x").empty()) << "nobody waits for 3";
  // Behind 2's hold of s: 4, then 1 (which 4 holds t for), then 1's waiters for r... 1 is
  // expanded once: its wait for r is behind it as well.
  const auto behind_s = WaitingBehind(g, A("b", 2), "s");
  ASSERT_FALSE(behind_s.empty());
  EXPECT_EQ(behind_s[0].edge->waiter, A("d", 4));
  EXPECT_TRUE(WaitingBehind(g, A("a", 1), "t").empty()) << "1 holds no t: nobody waits on that";
}

TEST(ProposedVictim, IsTheLockOfTheActorThatWaitedLeast) {
  // 1 (waited 900) holds p, waits for q; 2 (waited 100) holds q, waits for p. 2's wait closed the
  // cycle: revoke its hold of q, which 1 waits for.
  const WaitGraph g = BuildWaitGraph({H("p", A("a", 1), 1, "hp"), H("q", A("b", 2), 2, "hq")},
                                     {W("q", A("a", 1), 900), W("p", A("b", 2), 100)});
  ASSERT_EQ(g.deadlocks.size(), 1u);
  const Deadlock& d = g.deadlocks[0];
  const size_t v = ProposedVictim(d);
  EXPECT_EQ(d.cycle[v], A("b", 2));
  ASSERT_NE(HoldOfCycle(d, v), nullptr);
  EXPECT_EQ(HoldOfCycle(d, v)->hold_id, "hq");
}

TEST(WaitViews, DeadlocksNameEachProcessItsHoldAndTheProposedRevoke) {
  FleetView view;
  view.read_unix_ms = 5000;
  FleetAgent a;
  a.record.id = "a";
  a.record.name = "alpha";
  a.record.host = "alpha.example";
  view.agents.push_back(a);  // agent b is not in the registry: gone
  auto g = std::make_shared<WaitGraph>(
      BuildWaitGraph({H("p", A("a", 1), 1, "hp"), H("q", A("b", 2), 2, "hq")},
                     {W("q", A("a", 1), 900), W("p", A("b", 2), 100)}));
  view.deadlocks = g->deadlocks;
  view.waits = g;
  const auto j = DeadlocksJson(view);
  ASSERT_EQ(j.size(), 1u);
  const auto& cycle = j[0]["cycle"];
  ASSERT_EQ(cycle.size(), 2u);
  EXPECT_EQ(cycle[0]["agent_name"], "alpha");
  EXPECT_EQ(cycle[0]["host"], "alpha.example");
  EXPECT_EQ(cycle[0]["waits_for"], "q");
  EXPECT_EQ(cycle[0]["holds"]["resource"], "p");
  EXPECT_EQ(cycle[1]["gone"], true);
  EXPECT_EQ(cycle[1]["holds"]["hold_id"], "hq");
  EXPECT_EQ(j[0]["proposal"]["resource"], "q");
  EXPECT_EQ(j[0]["proposal"]["hold_id"], "hq");
  EXPECT_NE(j[0]["proposal"]["why"].get<std::string>().find("waited least"), std::string::npos);

  FleetLock row;
  row.resource = "p";
  row.agent_id = "a";
  row.quorum = true;
  Hold hold;
  hold.holder.pid = 1;
  row.detail = hold;
  const auto chain = BlockedByJson(view, row);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain[0]["waits_for"], "q");
  EXPECT_EQ(chain[0]["held_by"][0]["pid"], 2);
  EXPECT_EQ(chain[1]["cycle"], true);
}

}  // namespace
}  // namespace lw::fleet::wait_chain_test
