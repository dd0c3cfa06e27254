#pragma once
// The fleet's wait-for graph (issue 39): who waits for whom, and the cycles in it (deadlocks).
// Pure logic over the rows of a fleet view (fleet/view.h): no I/O, no clock.
//
// An actor is a process on a host: its agent's id and its pid (a detached lease's is its
// creator's). An edge goes from a waiting actor, through the resource it waits for, to each
// actor holding that resource (every holder of a semaphore's permits or of read holds: the
// waiter needs one of them to let go, so it waits for all). A cycle of edges is a deadlock: no
// actor in it can go on until another in it lets go, and no ttl ends it while they renew.
//
// What it cannot see: holds and waiters the reports do not list (a report names at most
// kMaxPublishedLocks and kMaxPublishedWaiters), holders whose pid is unknown (their agent did
// not report the hold), and nesting (a `lockwarden lock` run by another actor is its own actor
// here). A cycle is only ever built from what the reports say; it can be missed, not invented
// from rows the view does not have.

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace lw::fleet {

struct FleetLock;  // fleet/view.h

struct Actor {
  std::string agent_id;
  int pid = -1;
  auto operator<=>(const Actor&) const = default;
};

// One waiter's edge: it waits for `resource`, held by `holders` (each known holder once).
struct WaitEdge {
  Actor waiter;
  std::string resource;
  int64_t waited_ms = 0;
  std::vector<Actor> holders;
};

// A deadlock: a set of actors each of which waits, directly or through others of the set, for
// every other (a strongly connected part of the graph with a cycle in it). `cycle` is one cycle
// through it, starting at its smallest actor: cycle[i] waits for a resource cycle[i + 1] holds
// (the last for the first's), by edges[i].
struct Deadlock {
  std::vector<Actor> actors;  // all of the set, sorted
  std::vector<Actor> cycle;
  std::vector<WaitEdge> edges;
  int64_t oldest_wait_ms = 0;  // the longest any edge of the cycle has waited
};

struct WaitGraph {
  std::vector<WaitEdge> edges;      // every waiter with a known pid, in the rows' order
  std::vector<Deadlock> deadlocks;  // FindDeadlocks(edges)
};

// What the view read: a hold on a quorum of a resource someone waits for, and a waiter.
struct HoldSeen {
  std::string resource;
  Actor holder;
  int64_t since_unix_ms = 0;  // when the hold began, on its agent's clock (its report)
};
struct WaitSeen {
  std::string resource;
  Actor waiter;
  int64_t waited_ms = 0;
  // When the report that lists the waiter was taken; a waiter is only ever known as of then.
  int64_t reported_unix_ms = std::numeric_limits<int64_t>::max();
};

// The graph: each waiter waits for each holder of its resource whose hold began before the
// waiter's report was taken, and never for its own (another thread of the same process holds it:
// contention; a process is the actor, so its threads are not told apart). Freshness: the rows are
// read now, the waiters are known as of their
// agent's last report (every heartbeat). A hold that began after that report may be the
// waiter's own grant, or a later holder's: such a pair adds no edge, so a waiter granted since
// its report, or one that gave up and came back, never closes a cycle. A hold older than the
// report was held throughout: the waiter did wait for it then. (What this cannot see: a waiter
// for one of several permits or read holds that got another since its report; the view judges
// a deadlock by two reads in a row for that.)
WaitGraph BuildWaitGraph(const std::vector<HoldSeen>& holding, const std::vector<WaitSeen>& waiting);

// The same from rows of a view (FleetLock::waiters wait for each holder of any row of the same
// resource held on a quorum), with no report times: every pair is an edge. Rows whose holder's
// pid is unknown add no holder; a waiter whose pid is unknown adds no edge.
WaitGraph BuildWaitGraph(const std::vector<FleetLock>& rows);

// One Deadlock per strongly connected set of actors that has a cycle (an actor waiting for a
// edge to itself is a cycle of one; BuildWaitGraph adds none), ordered by their smallest actor. Linear in actors
// plus actor-to-actor edges (Tarjan's algorithm, iterative: no recursion depth to exhaust).
std::vector<Deadlock> FindDeadlocks(const std::vector<WaitEdge>& edges);

// The deadlocks of a read that the read before it found too (the same set of actors): what a
// view reports. One read can hold a cycle that was never there at once (a waiter for one of
// several permits granted another since its report); two reads a heartbeat apart with the
// same set are not that. `seen` is the previous read's sets, replaced by this read's.
std::vector<Deadlock> Confirmed(std::vector<Deadlock> found,
                                std::set<std::vector<Actor>>& seen);

}  // namespace lw::fleet
