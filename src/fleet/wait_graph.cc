#include "fleet/wait_graph.h"

#include "fleet/view.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace lw::fleet {
namespace {

// Actor-to-actor adjacency: for each actor, the actors it waits for, each with the edge (index
// into the edges) that says so.
struct Adjacency {
  std::vector<Actor> actors;  // sorted: the index of an actor is its id below
  std::vector<std::vector<std::pair<int, size_t>>> out;
};

Adjacency Index(const std::vector<WaitEdge>& edges) {
  std::set<Actor> all;
  for (const WaitEdge& e : edges) {
    all.insert(e.waiter);
    all.insert(e.holders.begin(), e.holders.end());
  }
  Adjacency a;
  a.actors.assign(all.begin(), all.end());
  a.out.resize(a.actors.size());
  auto id = [&](const Actor& actor) {
    return static_cast<int>(std::lower_bound(a.actors.begin(), a.actors.end(), actor) -
                            a.actors.begin());
  };
  for (size_t i = 0; i < edges.size(); ++i) {
    const int from = id(edges[i].waiter);
    for (const Actor& h : edges[i].holders) a.out[static_cast<size_t>(from)].push_back({id(h), i});
  }
  return a;
}

// Tarjan's strongly connected components, iteratively. Returns each component's actor ids.
std::vector<std::vector<int>> Components(const Adjacency& a) {
  const int n = static_cast<int>(a.actors.size());
  std::vector<int> index(static_cast<size_t>(n), -1), low(static_cast<size_t>(n), 0);
  std::vector<bool> on_stack(static_cast<size_t>(n), false);
  std::vector<int> stack;
  std::vector<std::vector<int>> components;
  int next = 0;
  for (int root = 0; root < n; ++root) {
    if (index[static_cast<size_t>(root)] >= 0) continue;
    // (node, position in its out list)
    std::vector<std::pair<int, size_t>> frames = {{root, 0}};
    index[static_cast<size_t>(root)] = low[static_cast<size_t>(root)] = next++;
    stack.push_back(root);
    on_stack[static_cast<size_t>(root)] = true;
    while (!frames.empty()) {
      auto& [v, pos] = frames.back();
      const auto& out = a.out[static_cast<size_t>(v)];
      if (pos < out.size()) {
        const int w = out[pos++].first;
        if (index[static_cast<size_t>(w)] < 0) {
          index[static_cast<size_t>(w)] = low[static_cast<size_t>(w)] = next++;
          stack.push_back(w);
          on_stack[static_cast<size_t>(w)] = true;
          frames.push_back({w, 0});
        } else if (on_stack[static_cast<size_t>(w)]) {
          low[static_cast<size_t>(v)] =
              std::min(low[static_cast<size_t>(v)], index[static_cast<size_t>(w)]);
        }
        continue;
      }
      const int done = v;
      frames.pop_back();
      if (!frames.empty()) {
        const int parent = frames.back().first;
        low[static_cast<size_t>(parent)] =
            std::min(low[static_cast<size_t>(parent)], low[static_cast<size_t>(done)]);
      }
      if (low[static_cast<size_t>(done)] != index[static_cast<size_t>(done)]) continue;
      std::vector<int> component;
      int w = -1;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[static_cast<size_t>(w)] = false;
        component.push_back(w);
      } while (w != done);
      components.push_back(std::move(component));
    }
  }
  return components;
}

// A cycle through `start` inside `members` (which are strongly connected): a breadth-first
// search from start's successors back to start, so the cycle found is a shortest one.
std::vector<std::pair<int, size_t>> CycleFrom(const Adjacency& a, int start,
                                              const std::set<int>& members) {
  std::map<int, std::pair<int, size_t>> came_from;  // node -> (previous node, edge)
  std::vector<int> frontier = {start};
  bool found = false;
  while (!frontier.empty() && !found) {
    std::vector<int> next;
    for (int v : frontier) {
      for (const auto& [w, edge] : a.out[static_cast<size_t>(v)]) {
        if (!members.contains(w) || came_from.contains(w)) continue;
        came_from[w] = {v, edge};
        if (w == start) {
          found = true;
          break;
        }
        next.push_back(w);
      }
      if (found) break;
    }
    frontier = std::move(next);
  }
  std::vector<std::pair<int, size_t>> path;  // (node, the edge it waits by), from start
  if (!found) return path;
  int v = start;
  do {
    const auto [prev, edge] = came_from.at(v);
    path.push_back({prev, edge});
    v = prev;
  } while (v != start);
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace

WaitGraph BuildWaitGraph(const std::vector<HoldSeen>& holding, const std::vector<WaitSeen>& waiting) {
  std::unordered_map<std::string, std::vector<const HoldSeen*>> holders;
  for (const HoldSeen& h : holding) holders[h.resource].push_back(&h);
  WaitGraph graph;
  std::set<std::pair<Actor, std::string>> seen;  // a waiter listed twice counts once
  for (const WaitSeen& w : waiting) {
    if (w.waiter.pid < 0 || w.waiter.agent_id.empty()) continue;
    if (!seen.insert({w.waiter, w.resource}).second) continue;
    WaitEdge edge{w.waiter, w.resource, w.waited_ms, {}, ProcessOf(w), w.cmdline, {}};
    std::set<Actor> by;
    if (const auto it = holders.find(w.resource); it != holders.end()) {
      for (const HoldSeen* h : it->second) {
        // A hold of its own process: another thread of it holds it (contention, not a cycle).
        if (h->holder == w.waiter && ProcessOf(*h) == ProcessOf(w)) continue;
        if (h->since_unix_ms > w.reported_unix_ms) continue;
        if (by.insert(h->holder).second) edge.holds.push_back(*h);
      }
    }
    edge.holders.assign(by.begin(), by.end());
    for (const Actor& h : edge.holders) graph.waited_for[h].push_back(graph.edges.size());
    graph.waits_of[edge.waiter].push_back(graph.edges.size());
    graph.edges.push_back(std::move(edge));
  }
  graph.deadlocks = FindDeadlocks(graph.edges);
  return graph;
}

WaitGraph BuildWaitGraph(const std::vector<FleetLock>& rows) {
  std::vector<HoldSeen> holding;
  std::vector<WaitSeen> waiting;
  for (const FleetLock& row : rows) {
    if (auto h = HoldSeenOf(row, std::numeric_limits<int64_t>::min())) {
      holding.push_back(std::move(*h));
    }
    for (const FleetWaiter& w : row.waiters) {
      waiting.push_back(WaitSeenOf(w.agent_id, w.detail, w.waited_ms,
                                   std::numeric_limits<int64_t>::max()));
    }
  }
  return BuildWaitGraph(holding, waiting);
}

std::vector<Deadlock> FindDeadlocks(const std::vector<WaitEdge>& edges) {
  const Adjacency a = Index(edges);
  std::vector<Deadlock> out;
  for (std::vector<int>& component : Components(a)) {
    std::sort(component.begin(), component.end());
    const int start = component.front();  // the smallest actor: ids follow the actors' order
    const std::set<int> members(component.begin(), component.end());
    const auto cycle = CycleFrom(a, start, members);
    if (cycle.empty()) continue;  // a single actor waiting for nobody in its set
    Deadlock d;
    for (int v : component) d.actors.push_back(a.actors[static_cast<size_t>(v)]);
    for (const auto& [v, edge] : cycle) {
      d.cycle.push_back(a.actors[static_cast<size_t>(v)]);
      d.edges.push_back(edges[edge]);
      d.oldest_wait_ms = std::max(d.oldest_wait_ms, edges[edge].waited_ms);
    }
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(),
            [](const Deadlock& x, const Deadlock& y) { return x.actors.front() < y.actors.front(); });
  return out;
}

std::optional<HoldSeen> HoldSeenOf(const FleetLock& row, int64_t since_unix_ms) {
  if (!row.quorum || !row.detail || row.detail->holder.pid < 0 || row.agent_id.empty()) {
    return std::nullopt;
  }
  const Peer& p = row.detail->holder;
  const int actor = p.actor_pid >= 0 ? p.actor_pid : p.pid;
  return HoldSeen{row.resource, Actor{row.agent_id, actor}, since_unix_ms, p.pid, row.hold_id,
                  p.cmdline};
}

WaitSeen WaitSeenOf(const std::string& agent_id, const WaiterDetail& w, int64_t waited_ms,
                    int64_t reported_unix_ms) {
  const int actor = w.actor_pid >= 0 ? w.actor_pid : w.pid;
  return WaitSeen{w.resource, Actor{agent_id, actor}, waited_ms, reported_unix_ms, w.pid,
                  w.cmdline};
}

std::vector<ChainStep> BlockingChain(const WaitGraph& graph, const Actor& holder,
                                     size_t max_steps) {
  std::vector<ChainStep> out;
  std::set<Actor> expanded = {holder};
  std::vector<Actor> path;  // the waiters of the steps above, by depth
  std::vector<std::pair<size_t, int>> todo;  // (edge, depth), the next on top
  const auto push_edges = [&](const Actor& actor, int depth) {
    const auto it = graph.waits_of.find(actor);
    if (it == graph.waits_of.end()) return;
    for (auto e = it->second.rbegin(); e != it->second.rend(); ++e) todo.push_back({*e, depth});
  };
  push_edges(holder, 0);
  while (!todo.empty() && out.size() < max_steps) {
    const auto [index, depth] = todo.back();
    todo.pop_back();
    const WaitEdge& e = graph.edges[index];
    path.resize(static_cast<size_t>(depth));
    path.push_back(e.waiter);
    bool cycle = false;
    std::vector<Actor> deeper;
    for (const Actor& h : e.holders) {
      if (std::find(path.begin(), path.end(), h) != path.end()) {
        cycle = true;
      } else if (expanded.insert(h).second) {
        deeper.push_back(h);
      }
    }
    out.push_back({depth, &e, cycle});
    for (auto h = deeper.rbegin(); h != deeper.rend(); ++h) push_edges(*h, depth + 1);
  }
  return out;
}

std::vector<ChainStep> WaitingBehind(const WaitGraph& graph, const Actor& holder,
                                     const std::string& resource, size_t max_steps) {
  std::vector<ChainStep> out;
  std::set<Actor> expanded = {holder};
  std::vector<Actor> path;  // the holders above the step being written, by depth
  std::vector<std::pair<size_t, int>> todo;  // (edge, depth), the next on top
  const auto push_edges = [&](const Actor& actor, int depth) {
    const auto it = graph.waited_for.find(actor);
    if (it == graph.waited_for.end()) return;
    for (auto e = it->second.rbegin(); e != it->second.rend(); ++e) {
      if (depth > 0 || graph.edges[*e].resource == resource) todo.push_back({*e, depth});
    }
  };
  push_edges(holder, 0);
  path.push_back(holder);
  while (!todo.empty() && out.size() < max_steps) {
    const auto [index, depth] = todo.back();
    todo.pop_back();
    const WaitEdge& e = graph.edges[index];
    path.resize(static_cast<size_t>(depth) + 1);
    const bool cycle = std::find(path.begin(), path.end(), e.waiter) != path.end();
    out.push_back({depth, &e, cycle});
    if (!cycle && expanded.insert(e.waiter).second) {
      path.push_back(e.waiter);
      push_edges(e.waiter, depth + 1);
    }
  }
  return out;
}

size_t ProposedVictim(const Deadlock& d) {
  size_t best = 0;
  for (size_t i = 1; i < d.edges.size(); ++i) {
    if (d.edges[i].waited_ms < d.edges[best].waited_ms) best = i;
  }
  return best;
}

const HoldSeen* HoldOfCycle(const Deadlock& d, size_t i) {
  if (d.cycle.empty() || i >= d.cycle.size()) return nullptr;
  const WaitEdge& before = d.edges[(i + d.cycle.size() - 1) % d.cycle.size()];
  for (const HoldSeen& h : before.holds) {
    if (h.holder == d.cycle[i]) return &h;
  }
  return nullptr;
}

std::vector<Deadlock> Confirmed(std::vector<Deadlock> found,
                                std::set<std::vector<Actor>>& seen) {
  std::set<std::vector<Actor>> now;
  std::vector<Deadlock> out;
  for (Deadlock& d : found) {
    now.insert(d.actors);
    if (seen.contains(d.actors)) out.push_back(std::move(d));
  }
  seen = std::move(now);
  return out;
}

}  // namespace lw::fleet
