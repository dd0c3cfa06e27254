#pragma once
// Metrics: the registry every Prometheus family the agent exports lives in (docs/metrics.md is
// the user's view), the families of the agent as a whole, and the observers through which the
// socket server, the master connections and the leak scanner report into them. Rooms that count
// their own stats (the lock engine's EngineStats) declare them on registry().
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

#include "redis/node.h"
#include "scan/scan_observer.h"
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

class Metrics {
 public:
  // master_addrs: "host:port" of every master, in configuration order (the index used by the
  // node and scan observers). scan_interval_s <= 0: the scanner is off and its families are
  // not registered.
  Metrics(const std::vector<std::string>& master_addrs, const BuildInfo& build,
          double scan_interval_s);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  NodeObserver& node(size_t index);
  ScanObserver& scan();

  // The registry every room declares its stats on (src/stats/stats.h); Serialize reads it.
  stats::Registry& registry();

  void SetState(const StateSample& state);

  // The text exposition format (version 0.0.4) of every family.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lw
