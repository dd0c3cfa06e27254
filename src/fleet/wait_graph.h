#pragma once
// The fleet's wait-for graph (issue 39): who waits for whom, and the cycles in it (deadlocks).
// Pure logic over the rows of a fleet view (fleet/view.h): no I/O, no clock.
//
// An actor is a process on a host: its agent's id and its pid (a detached lease's is its
// creator's). A process that a holder or waiter of the same agent started, directly or not (a
// `lockwarden lock` nested in another's command), is part of that outer actor: its agent's
// report names the outer pid (Peer::actor_pid). An edge goes from a waiting actor, through the
// resource it waits for, to each actor holding that resource (every holder of a semaphore's
// permits or of read holds: the waiter needs one of them to let go, so it waits for all). A
// cycle of edges is a deadlock: no actor in it can go on until another in it lets go, and no ttl
// ends it while they renew.
//
// What it cannot see: holds and waiters the reports do not list (a report names at most
// kMaxPublishedLocks and kMaxPublishedWaiters), holders whose pid is unknown (their agent did
// not report the hold). A cycle is only ever built from what the reports say; it can be missed,
// not invented from rows the view does not have.

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace lw::fleet {

struct FleetLock;     // fleet/view.h
struct WaiterDetail;  // fleet/records.h

struct Actor {
  std::string agent_id;
  int pid = -1;
  auto operator<=>(const Actor&) const = default;
};

// What the view read: a hold on a quorum of a resource someone waits for.
struct HoldSeen {
  std::string resource;
  Actor holder;
  int64_t since_unix_ms = 0;  // when the hold began, on its agent's clock (its report)
  int pid = -1;         // the process that holds it, when not holder.pid (a nested one)
  std::string hold_id{};  // what a revoke names it by (FleetLock::hold_id)
  std::string cmdline{};  // the holding process's
};

// A waiter the view read.
struct WaitSeen {
  std::string resource;
  Actor waiter;
  int64_t waited_ms = 0;
  // When the report that lists the waiter was taken; a waiter is only ever known as of then.
  int64_t reported_unix_ms = std::numeric_limits<int64_t>::max();
  int pid = -1;  // the process that waits, when not waiter.pid (a nested one)
  std::string cmdline{};
};

// The process that holds or waits (pid, else its actor's).
inline int ProcessOf(const HoldSeen& h) { return h.pid >= 0 ? h.pid : h.holder.pid; }
inline int ProcessOf(const WaitSeen& w) { return w.pid >= 0 ? w.pid : w.waiter.pid; }

// One waiter's edge: it waits for `resource`, held by `holders` (each known holder once).
struct WaitEdge {
  Actor waiter;
  std::string resource;
  int64_t waited_ms = 0;
  std::vector<Actor> holders;
  int pid = -1;            // the process that waits (ProcessOf)
  std::string cmdline{};   // its command line
  std::vector<HoldSeen> holds{};  // the holds that make `holders`, by holder
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
  std::map<Actor, std::vector<size_t>> waits_of;  // an actor's edges (indices into edges)
  std::map<Actor, std::vector<size_t>> waited_for;  // the edges to an actor (it holds for them)
};

// One step of a blocking chain: the actor at `depth` waits by `edge` (0: the holder asked
// about). `cycle`: one of the edge's holders is already on the chain above it (a deadlock).
struct ChainStep {
  int depth = 0;
  const WaitEdge* edge = nullptr;
  bool cycle = false;
};

// Why `holder` does not let go: what it waits for, what each of those holders waits for, and so
// on, depth first, each actor expanded once, at most `max_steps` steps. Empty: it waits for
// nothing the reports list (it is running). The steps point into `graph`.
std::vector<ChainStep> BlockingChain(const WaitGraph& graph, const Actor& holder,
                                     size_t max_steps = 32);

// Who waits behind `holder`'s hold of `resource`: the waits for it (depth 0), the waits for
// what those waiters hold (any resource), and so on, depth first, each actor once, at most
// `max_steps` steps. `cycle`: the waiter is already on the path (a deadlock). The steps point
// into `graph`.
std::vector<ChainStep> WaitingBehind(const WaitGraph& graph, const Actor& holder,
                                     const std::string& resource, size_t max_steps = 32);

// Which lock of `d` to revoke to end it: the position in d.cycle whose actor has waited least
// (ties: the first). The lock is the one of that actor's that the previous position waits for
// (HoldOfCycle). Its actor began waiting last: it is the wait that closed the cycle, the one a
// deadlock detector refuses.
size_t ProposedVictim(const Deadlock& d);

// The hold of d.cycle[i] that d.cycle[i - 1] waits for (nullptr when the edge does not say).
const HoldSeen* HoldOfCycle(const Deadlock& d, size_t i);


// The graph: each waiter waits for each holder of its resource whose hold began before the
// waiter's report was taken, and never for a hold of its own process (another thread of it
// holds it: contention; threads are not told apart). A nested process waiting for a hold of its
// outer actor is a cycle of one: the outer command does not end before the nested one. Freshness: the rows are
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

// A row's hold as the graph sees it (its actor from the holder's report), with its start; nullopt
// when it cannot be an edge's end (not on a quorum, or no pid or agent known).
std::optional<HoldSeen> HoldSeenOf(const FleetLock& row, int64_t since_unix_ms);
// A waiter of agent `agent_id`'s report as the graph sees it.
WaitSeen WaitSeenOf(const std::string& agent_id, const WaiterDetail& w, int64_t waited_ms,
                    int64_t reported_unix_ms);

// One Deadlock per strongly connected set of actors that has a cycle (an edge from an actor to
// itself is a cycle of one), ordered by their smallest actor. Linear in actors plus
// actor-to-actor edges (Tarjan's algorithm, iterative: no recursion depth to exhaust).
std::vector<Deadlock> FindDeadlocks(const std::vector<WaitEdge>& edges);

// The deadlocks of a read that the read before it found too (the same set of actors): what a
// view reports. One read can hold a cycle that was never there at once (a waiter for one of
// several permits granted another since its report); two reads a heartbeat apart with the
// same set are not that. `seen` is the previous read's sets, replaced by this read's.
std::vector<Deadlock> Confirmed(std::vector<Deadlock> found,
                                std::set<std::vector<Actor>>& seen);

}  // namespace lw::fleet
