#pragma once
// Metrics: the one registry every Prometheus family of the agent lives on (docs/metrics.md is
// the user's view), the agent-wide state gauges, and the exposition. Every other family is
// declared and counted in the room that counts it (stats/stats.h): the engine
// (locking/engine_stats.h), the socket (agent/request_stats.h), each master
// (redis/node_stats.h), the scanner (scan/scan_stats.h) and the admin server
// (admin/admin_stats.h), all on registry().
//
// prometheus-cpp objects are thread-safe: the loop thread, the scanner thread and HTTP threads
// all write or read here.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stats/stats.h"

namespace lw {

struct BuildInfo {
  std::string version;
  std::string commit;
};

// Agent-wide state, sampled on the loop thread (see Snapshot).
struct StateSample {
  size_t locks_held = 0;
  size_t sessions = 0;
  size_t waiters = 0;
  int masters = 0;
  int masters_up = 0;
  int quorum = 0;
  int masters_usable = 0;  // up and not in restart quarantine
  int64_t oldest_wait_ms = 0;  // how long this agent's longest-queued acquire has waited; 0: none
};

class Metrics {
 public:
  // master_addrs: "host:port" of every master, in configuration order.
  Metrics(const std::vector<std::string>& master_addrs, const BuildInfo& build);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The registry every room declares its stats on; Serialize reads it.
  stats::Registry& registry() { return *registry_; }

  void SetState(const StateSample& state);

  // Any thread: `registry`'s families join the exposition whenever `included()` says so at
  // serialization (the fleet totals, exported only while this agent is the reporter).
  void AddConditional(std::shared_ptr<stats::Registry> registry, std::function<bool()> included);

  // The text exposition format (version 0.0.4) of every family.
  std::string Serialize() const;

 private:
  struct StateGauges;
  std::shared_ptr<stats::Registry> registry_;
  std::unique_ptr<StateGauges> state_;
  struct Conditional {
    std::shared_ptr<stats::Registry> registry;
    std::function<bool()> included;
  };
  mutable std::mutex conditional_mu_;
  std::vector<Conditional> conditional_;
};

}  // namespace lw
