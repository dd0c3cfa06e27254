#pragma once
// Stats declared in the room that counts them (after Envoy's stat lists). A room keeps one
// struct of its metrics, one member per metric, each declared with its name and help on one
// line, and bumps them where the event happens; nothing relays them. Adding a metric is that
// line plus its increment (and its row in docs/metrics.md).
//
//   struct EngineStats {
//     explicit EngineStats(stats::Registry& r) : r_(r) {}
//     stats::Registry& r_;
//     stats::Counter handoffs{r_, "lockwarden_local_handoffs_total", "Releases handed ..."};
//     stats::ByEnum<stats::Counter, RenewOutcome> renewals{
//         r_, "lockwarden_renewals_total", "Renewal rounds", "outcome", kRenewOutcomeNames};
//   };
//
// Members are initialised in declaration order, so `r_` comes first. Every metric is a
// prometheus-cpp child resolved once: recording is an atomic add (counter, gauge) or a short
// mutex-guarded add (histogram), safe from any thread. Declaring the same family twice (one
// struct per master, say) adds children to one family; the help text must then be the same.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lw::stats {

using Registry = prometheus::Registry;
using Labels = std::map<std::string, std::string>;
using Buckets = prometheus::Histogram::BucketBoundaries;

// Geometric bucket bounds: first * 2^(k / per_octave) for k = 0, 1, ... up to and including the
// first bound >= last, each rounded to 4 significant digits (so `le` labels stay short). With
// ratio r = 2^(1 / per_octave) between neighbours, histogram_quantile's estimate of any quantile
// whose true value lies in (first, last] is off by less than r - 1 of it: the estimate and the
// true sample quantile fall in one bucket (a, b], and b - a < (r - 1) * a (docs/metrics.md,
// "Buckets"). 8 per octave: r = 1.0905, the rounding keeps every ratio at most 1.0914.
// Throws std::invalid_argument unless 0 < first <= last and per_octave >= 1.
Buckets ExponentialBuckets(double first, int per_octave, double last);

inline double Seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

class Counter {
 public:
  Counter(Registry& r, const std::string& name, const std::string& help, const Labels& labels = {});
  void Inc(double v = 1) { c_->Increment(v); }
  double Value() const { return c_->Value(); }

 private:
  prometheus::Counter* c_;
};

class Gauge {
 public:
  Gauge(Registry& r, const std::string& name, const std::string& help, const Labels& labels = {});
  void Set(double v) { g_->Set(v); }
  void Inc(double v = 1) { g_->Increment(v); }
  void Dec(double v = 1) { g_->Decrement(v); }
  double Value() const { return g_->Value(); }

 private:
  prometheus::Gauge* g_;
};

class Histogram {
 public:
  Histogram(Registry& r, const std::string& name, const std::string& help, const Buckets& buckets,
            const Labels& labels = {});
  void Observe(double v) { h_->Observe(v); }
  void ObserveSeconds(std::chrono::nanoseconds d) { h_->Observe(Seconds(d)); }
  // Observations counted elsewhere: per bucket (one per bound, then +Inf; not cumulative), and
  // their sum.
  void ObserveBuckets(const std::vector<double>& counts, double sum) {
    h_->ObserveMultiple(counts, sum);
  }
  // Observations so far (for tests and status pages).
  uint64_t Count() const;

 private:
  prometheus::Histogram* h_;
};

// One family with a child per value of enum E (which ends in kCount), labelled
// `label`=names[value], plus `extra` labels on every child.
template <class Metric, class E, size_t N = static_cast<size_t>(E::kCount)>
class ByEnum {
 public:
  template <class... Args>
  ByEnum(Registry& r, const std::string& name, const std::string& help, const std::string& label,
         const std::array<std::string_view, N>& names, const Labels& extra = {},
         const Args&... args) {
    for (size_t i = 0; i < N; ++i) {
      Labels labels = extra;
      labels[label] = std::string(names[i]);
      children_[i] = std::make_unique<Metric>(r, name, help, args..., labels);
    }
  }
  Metric& operator[](E e) { return *children_[static_cast<size_t>(e)]; }
  const Metric& operator[](E e) const { return *children_[static_cast<size_t>(e)]; }

 private:
  std::array<std::unique_ptr<Metric>, N> children_;
};

}  // namespace lw::stats
