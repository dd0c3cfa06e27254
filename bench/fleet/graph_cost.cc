// What the wait-for graph (src/fleet/wait_graph.h) adds to building a fleet view: a view of
// LOCKS rows held on 3 masters by AGENTS agents, each reporting its 200 oldest holds (all rows
// reported: every hold's holder is known), built once without waiters and once with WAITERS
// waiters (at most 200 per report, each waiting for a resource another agent's process holds,
// seeded; a few of them close cycles), in-memory through ViewBuilder as the reader feeds it
// (batches of 1,000 keys). Prints one JSON line: each build's time, the difference, the edges
// and deadlocks found, and the graph alone (BuildWaitGraph over what the view saw). A figure,
// never an assertion.
//
//   lw_bench_wait_graph [--locks 100000] [--waiters 10000] [--runs 3]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fleet/records.h"
#include "fleet/view.h"
#include "fleet/wait_graph.h"

namespace {

using lw::fleet::MasterRead;

constexpr int kMasters = 3;
constexpr int64_t kNow = 1'800'000'000'000;

std::string AgentId(size_t a) {
  char id[17];
  std::snprintf(id, sizeof id, "%016zx", a + 1);
  return id;
}

struct Fleet {
  std::vector<MasterRead> registry;  // every master's agents and reports
  std::vector<std::vector<MasterRead>> batches;
};

// Agent a holds resources r<a*200> .. r<a*200+199> through process 1000+a; with waiters, agent
// a's process waits for a resource of agent (a+1+k) mod agents, k = 0.. (seeded offsets), and
// every 100th agent's first wait goes back to agent a-1's: cycles of two.
Fleet Make(size_t locks, size_t waiters) {
  const size_t agents = (locks + lw::fleet::kMaxPublishedLocks - 1) / lw::fleet::kMaxPublishedLocks;
  std::mt19937 rng(42);
  std::vector<lw::fleet::HolderReport> reports(agents);
  std::vector<lw::fleet::AgentRecord> records(agents);
  for (size_t a = 0; a < agents; ++a) {
    records[a].id = AgentId(a);
    records[a].name = "agent-" + std::to_string(a);
    records[a].heartbeat_unix_ms = kNow - 1000;
    reports[a].unix_ms = kNow - 500;
  }
  for (size_t i = 0; i < locks; ++i) {
    const size_t a = i / lw::fleet::kMaxPublishedLocks;
    lw::Hold h;
    h.resource = "r" + std::to_string(i);
    h.holder.pid = static_cast<int>(1000 + a);
    h.holder.cmdline = "worker --job " + std::to_string(i);
    h.held_since_unix_ms = kNow - 60'000;
    h.ttl_ms = 30'000;
    h.renew = true;
    reports[a].locks.push_back(h);
  }
  for (size_t w = 0; w < waiters; ++w) {
    const size_t a = w / lw::fleet::kMaxPublishedWaiters % agents;
    size_t target = (a + 1 + rng() % 7) % agents;
    if (w % lw::fleet::kMaxPublishedWaiters == 0 && a % 100 == 1) target = a - 1;
    lw::fleet::WaiterDetail d;
    d.resource = "r" + std::to_string(target * lw::fleet::kMaxPublishedLocks + rng() % 200);
    d.pid = static_cast<int>(1000 + a);
    d.cmdline = "worker";
    d.since_unix_ms = kNow - 5'000;
    reports[a].waiters.push_back(d);
  }
  Fleet f;
  for (int m = 0; m < kMasters; ++m) {
    MasterRead r;
    r.master = "127.0.0.1:" + std::to_string(7000 + m);
    r.ok = true;
    r.agents = records;
    for (size_t a = 0; a < agents; ++a) r.reports.emplace_back(records[a].id, reports[a]);
    f.registry.push_back(std::move(r));
  }
  for (size_t start = 0; start < locks; start += 1000) {
    std::vector<MasterRead> batch(kMasters);
    for (int m = 0; m < kMasters; ++m) {
      batch[m].master = f.registry[m].master;
      batch[m].ok = true;
      for (size_t i = start; i < std::min(locks, start + 1000); ++i) {
        const size_t a = i / lw::fleet::kMaxPublishedLocks;
        batch[m].copies.push_back({"lock:r" + std::to_string(i),
                                   lw::fleet::LockValue(AgentId(a), "t" + std::to_string(i)), 20'000});
      }
    }
    f.batches.push_back(std::move(batch));
  }
  return f;
}

// Seconds to build the view of `f`, and the view.
double Build(const Fleet& f, lw::fleet::FleetView& view) {
  lw::fleet::ViewSettings s;
  s.key_prefix = "lock:";
  s.stuck_after_ms = 300'000;
  s.now_unix_ms = kNow;
  s.masters = kMasters;
  s.keep = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  lw::fleet::ViewBuilder builder(s);
  builder.AddRegistry(f.registry);
  for (const auto& batch : f.batches) builder.AddCopies(batch);
  std::vector<MasterRead> status(kMasters);
  view = builder.Finish(std::move(status), 0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  size_t locks = 100'000, waiters = 10'000;
  int runs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--locks") locks = std::strtoul(argv[i + 1], nullptr, 10);
    if (flag == "--waiters") waiters = std::strtoul(argv[i + 1], nullptr, 10);
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
  }
  const Fleet without = Make(locks, 0);
  const Fleet with = Make(locks, waiters);
  double best_without = 1e9, best_with = 1e9, best_graph = 1e9;
  size_t edges = 0, deadlocks = 0;
  for (int r = 0; r < runs; ++r) {
    lw::fleet::FleetView v0, v1;
    best_without = std::min(best_without, Build(without, v0));
    best_with = std::min(best_with, Build(with, v1));
    edges = v1.waits ? v1.waits->edges.size() : 0;
    deadlocks = v1.deadlocks.size();
    // The graph alone, over what the view saw: every edge's holds and every waiter.
    std::vector<lw::fleet::HoldSeen> holding;
    std::vector<lw::fleet::WaitSeen> waiting;
    for (const auto& e : v1.waits->edges) {
      holding.insert(holding.end(), e.holds.begin(), e.holds.end());
      waiting.push_back({e.resource, e.waiter, e.waited_ms, kNow, e.pid, e.cmdline});
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto g = lw::fleet::BuildWaitGraph(holding, waiting);
    best_graph = std::min(best_graph,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (g.edges.size() != edges) std::fprintf(stderr, "edges differ: %zu\n", g.edges.size());
  }
  std::printf("{\"locks\": %zu, \"waiters\": %zu, \"edges\": %zu, \"deadlocks_in_one_read\": %zu, "
              "\"view_build_s_without_waiters\": %.3f, \"view_build_s_with_waiters\": %.3f, "
              "\"graph_share_s\": %.3f, \"build_wait_graph_alone_ms\": %.1f, \"runs\": %d}\n",
              locks, waiters, edges, deadlocks, best_without, best_with, best_with - best_without,
              best_graph * 1000, runs);
  return 0;
}
