#include "stats/stats.h"

namespace lw::stats {

Counter::Counter(Registry& r, const std::string& name, const std::string& help,
                 const Labels& labels)
    : c_(&prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels)) {}

Gauge::Gauge(Registry& r, const std::string& name, const std::string& help, const Labels& labels)
    : g_(&prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels)) {}

Histogram::Histogram(Registry& r, const std::string& name, const std::string& help,
                     const Buckets& buckets, const Labels& labels)
    : h_(&prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(labels, buckets)) {}

uint64_t Histogram::Count() const { return h_->Collect().histogram.sample_count; }

}  // namespace lw::stats
