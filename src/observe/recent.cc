#include "observe/recent.h"

#include <algorithm>
#include <cmath>

namespace lw {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "info";
}

void EventLog::Add(Event event) {
  std::lock_guard lock(mu_);
  notable_.push_front(std::move(event));
  if (notable_.size() > kNotableCapacity) notable_.pop_back();
}

void EventLog::AddNoisy(Event event, const std::string& coalesce_key) {
  std::lock_guard lock(mu_);
  for (Noisy& n : noisy_) {
    if (n.key != coalesce_key) continue;
    if (event.at_unix_ms - n.event.at_unix_ms > kCoalesceMs) break;  // too old: a new event
    n.event.count += event.count;
    n.event.at_unix_ms = event.at_unix_ms;
    n.event.message = std::move(event.message);
    return;
  }
  noisy_.push_front({std::move(event), coalesce_key});
  if (noisy_.size() > kNoisyCapacity) noisy_.pop_back();
}

std::vector<Event> EventLog::Recent() const {
  std::vector<Event> out;
  {
    std::lock_guard lock(mu_);
    out.reserve(notable_.size() + noisy_.size());
    out.insert(out.end(), notable_.begin(), notable_.end());
    for (const Noisy& n : noisy_) out.push_back(n.event);
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) {
    return a.at_unix_ms > b.at_unix_ms;
  });
  return out;
}

namespace {
constexpr double kFirstEdgeMs = 0.01;
const double kBinFactor = std::pow(2.0, 0.25);
}  // namespace

size_t AcquireHistory::BinOf(double wait_ms) {
  if (!(wait_ms > kFirstEdgeMs)) return 0;  // also NaN
  const double steps = std::ceil(std::log(wait_ms / kFirstEdgeMs) / std::log(kBinFactor) - 1e-9);
  return std::min(kBins - 1, static_cast<size_t>(steps));
}

double AcquireHistory::BinUpperMs(size_t bin) {
  return kFirstEdgeMs * std::pow(kBinFactor, static_cast<double>(bin));
}

void AcquireHistory::Record(int64_t now_unix_ms, AcquireOutcome outcome, double wait_ms) {
  if (outcome == AcquireOutcome::kCount || now_unix_ms < 0) return;
  const int64_t start = now_unix_ms - now_unix_ms % kBucketMs;
  Bucket& b = ring_[static_cast<size_t>(start / kBucketMs) % kBuckets];
  if (b.start != start) b = Bucket{start, {}, {}};
  ++b.outcomes[static_cast<size_t>(outcome)];
  ++b.waits[BinOf(wait_ms)];
}

std::vector<HistoryPoint> AcquireHistory::Points(int64_t now_unix_ms) const {
  std::vector<HistoryPoint> points;
  if (now_unix_ms < 0) return points;
  points.reserve(kBuckets);
  const int64_t current = now_unix_ms - now_unix_ms % kBucketMs;
  for (int64_t i = kBuckets - 1; i >= 0; --i) {
    const int64_t start = current - i * kBucketMs;
    if (start < 0) continue;
    HistoryPoint p;
    p.t_unix_ms = start;
    const Bucket& b = ring_[static_cast<size_t>(start / kBucketMs) % kBuckets];
    if (b.start == start) {
      p.outcomes = b.outcomes;
      uint64_t total = 0;
      for (uint32_t n : b.waits) total += n;
      if (total > 0) {
        // Nearest rank: the smallest bin holding at least 99% of the waits.
        const uint64_t rank = (total * 99 + 99) / 100;
        uint64_t seen = 0;
        for (size_t bin = 0; bin < kBins; ++bin) {
          seen += b.waits[bin];
          if (seen >= rank) {
            p.wait_p99_ms = BinUpperMs(bin);
            break;
          }
        }
      }
    }
    points.push_back(p);
  }
  return points;
}

}  // namespace lw
