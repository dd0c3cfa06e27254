#include "locking/engine_stats.h"

namespace lw {

// 100 us .. 30 s at 8 per octave: histogram_quantile is within 9.2% of the true quantile
// anywhere in that range (stats::ExponentialBuckets; docs/metrics.md, "Buckets"); then a coarse
// tail up to max_wait_ms's default (300 s), so that a long wait is not read as 31 s.
const stats::Buckets EngineStats::kWaitBuckets = [] {
  stats::Buckets b = stats::ExponentialBuckets(0.0001, 8, 30);
  b.insert(b.end(), {60, 120, 300});
  return b;
}();
const stats::Buckets EngineStats::kAttemptBuckets = {0, 1, 2, 3, 5, 10, 20, 50, 100};
// The fine part of the wait layout, then a coarse tail for holds of minutes to an hour.
const stats::Buckets EngineStats::kHoldBuckets = [] {
  stats::Buckets b = stats::ExponentialBuckets(0.0001, 8, 30);
  b.insert(b.end(), {60, 300, 900, 1800, 3600});
  return b;
}();

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
