#include "support/quantiles.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lw::test {

double HistogramQuantile(double q, std::vector<CumulativeBucket> buckets) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (std::isnan(q)) return kNaN;
  if (q < 0) return -kInf;
  if (q > 1) return kInf;
  if (buckets.empty()) return kNaN;
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const CumulativeBucket& a, const CumulativeBucket& b) { return a.le < b.le; });
  if (buckets.back().le != kInf) return kNaN;
  // Equal bounds (the same histogram from several series) count as one bucket.
  std::vector<CumulativeBucket> merged;
  for (const auto& b : buckets) {
    if (!merged.empty() && merged.back().le == b.le) {
      merged.back().count += b.count;
    } else {
      merged.push_back(b);
    }
  }
  // A count below an earlier one (inconsistent data) is raised to it.
  for (size_t i = 1; i < merged.size(); ++i) {
    merged[i].count = std::max(merged[i].count, merged[i - 1].count);
  }
  const size_t n = merged.size();
  if (n < 2) return kNaN;
  const double total = merged.back().count;
  if (total == 0) return kNaN;
  double rank = q * total;
  // Among the finite buckets, the first that reaches the rank; none: the +Inf bucket.
  size_t b = 0;
  while (b < n - 1 && merged[b].count < rank) ++b;
  if (b == n - 1) return merged[n - 2].le;
  if (b == 0 && merged[0].le <= 0) return merged[0].le;
  double lower = 0;
  double in_bucket = merged[b].count;
  if (b > 0) {
    lower = merged[b - 1].le;
    in_bucket -= merged[b - 1].count;
    rank -= merged[b - 1].count;
  }
  return lower + (merged[b].le - lower) * (rank / in_bucket);
}

std::vector<CumulativeBucket> Bucketize(const std::vector<double>& bounds,
                                        const std::vector<double>& samples) {
  std::vector<CumulativeBucket> out;
  for (double le : bounds) out.push_back({le, 0});
  out.push_back({std::numeric_limits<double>::infinity(), 0});
  for (double s : samples) {
    for (auto& b : out) {
      if (s <= b.le) ++b.count;
    }
  }
  return out;
}

double SampleQuantile(double q, std::vector<double> samples) {
  if (samples.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(samples.begin(), samples.end());
  const double rank = std::ceil(q * static_cast<double>(samples.size()));
  const size_t index = rank <= 1 ? 0 : static_cast<size_t>(rank) - 1;
  return samples[std::min(index, samples.size() - 1)];
}

}  // namespace lw::test
