#pragma once
// Metrics: the registry every Prometheus family the agent exports is on (docs/metrics.md is
// the user's view), and the observers through which the engine and the socket server report
// into the families declared here. The master connections (redis/node_stats.h) and the leak
// scanner (scan/scan_stats.h) declare theirs on registry() and count them themselves.
//
// Label children on hot paths are resolved once at construction, so recording an event is an
// atomic add (counters) or a short mutex-guarded add (histograms). prometheus-cpp objects are
// thread-safe: the loop thread, the scanner thread and HTTP threads all write or read here.

#include <prometheus/registry.h>

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/server.h"
#include "locking/engine_observer.h"
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
};

// Why the admin HTTP server refused: unauthorized (401: no or wrong token, for a read or an
// action), forbidden (403: cross-site action, actions disabled), too_large (413),
// too_many_connections (503 at accept), timeout (a request or its response missed its deadline).
inline constexpr std::array<std::string_view, 5> kAdminRefusalReasons = {
    "unauthorized", "forbidden", "too_large", "too_many_connections", "timeout"};

class Metrics {
 public:
  // master_addrs: "host:port" of every master, in configuration order (the index the engine
  // reports masters by).
  Metrics(const std::vector<std::string>& master_addrs, const BuildInfo& build);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  EngineObserver& engine();
  RequestObserver& requests();
  // The registry Serialize() exposes: other rooms declare their stats on it.
  stats::Registry& registry();

  void SetState(const StateSample& state);
  // action: expire_key, delete_key, rescan; result: done, refused, stale, error.
  void CountAdminAction(const std::string& action, const std::string& result);
  // A request or connection the admin HTTP server refused (kAdminRefusalReasons).
  void CountAdminRefusal(std::string_view reason);
  // A release announced by another agent woke a waiter backing off here.
  void CountReleaseWakeup();

  // The text exposition format (version 0.0.4) of every family.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lw
