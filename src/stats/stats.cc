#include "stats/stats.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace lw::stats {

Counter::Counter(Registry& r, const std::string& name, const std::string& help,
                 const Labels& labels)
    : c_(&prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels)) {}

Gauge::Gauge(Registry& r, const std::string& name, const std::string& help, const Labels& labels)
    : g_(&prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels)) {}

Histogram::Histogram(Registry& r, const std::string& name, const std::string& help,
                     const Buckets& buckets, const Labels& labels)
    : h_(&prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(labels, buckets)) {}

Buckets ExponentialBuckets(double first, int per_octave, double last) {
  if (!(first > 0) || !(last >= first) || !std::isfinite(last) || per_octave < 1) {
    throw std::invalid_argument(
        "ExponentialBuckets: need 0 < first <= last < inf and per_octave >= 1");
  }
  Buckets bounds;
  for (int k = 0;; ++k) {
    const double exact = first * std::exp2(static_cast<double>(k) / per_octave);
    // Through the decimal text, so the bound is the double nearest its 4-digit label.
    char text[32];
    std::snprintf(text, sizeof text, "%.3e", exact);
    bounds.push_back(std::strtod(text, nullptr));
    if (bounds.back() >= last) return bounds;
  }
}

uint64_t Histogram::Count() const { return h_->Collect().histogram.sample_count; }

}  // namespace lw::stats
