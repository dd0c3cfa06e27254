#pragma once
// LatencyWindow: the last N round trips of one master, for the operator's p50/p99.
// Add() is on the hot path (every reply) and only stores; quantiles are computed on demand
// (status snapshots, a few times a second), on a copy. Pure: no clock, no I/O.

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace lw {

class LatencyWindow {
 public:
  static constexpr size_t kDefaultCapacity = 1024;

  explicit LatencyWindow(size_t capacity = kDefaultCapacity);

  // Records one round trip; once full, the oldest one is forgotten.
  void Add(std::chrono::nanoseconds latency);

  // The nearest-rank q-quantile (q in [0, 1], clamped) of the recorded round trips, in
  // milliseconds: the smallest value that at least q of them do not exceed. nullopt while
  // nothing has been recorded.
  std::optional<double> QuantileMs(double q) const;

  size_t size() const { return size_; }

 private:
  std::vector<double> ms_;  // ring; the first size_ slots are in use
  size_t next_ = 0;         // slot the next Add writes
  size_t size_ = 0;
};

}  // namespace lw
