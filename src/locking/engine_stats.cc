#include "locking/engine_stats.h"

namespace lw {

const stats::Buckets EngineStats::kWaitBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                  0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                  1,      2.5,     5,      10,    30};
const stats::Buckets EngineStats::kAttemptBuckets = {0, 1, 2, 3, 5, 10, 20, 50, 100};
const stats::Buckets EngineStats::kHoldBuckets = {0.001, 0.01, 0.1, 0.5, 1,   5,   10,
                                                  30,    60,   300, 900, 1800, 3600};

EngineStats::EngineStats(stats::Registry& r, const std::vector<std::string>& masters) : r_(r) {
  for (const auto& addr : masters) {
    // The family the master connections count their errors in (observe/metrics.cc): a round's
    // node timeout is one more kind of master error.
    master_timeouts.push_back(std::make_unique<stats::Counter>(
        r_, "lockwarden_master_errors_total", "Master errors by kind.",
        stats::Labels{{"master", addr}, {"kind", "timeout"}}));
  }
}

}  // namespace lw
