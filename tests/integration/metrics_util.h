#pragma once
// Reading a live /metrics exposition in tests.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/quantiles.h"

namespace lw::test {

using Labels = std::map<std::string, std::string>;

// Value of the first sample named `name` whose labels include every pair of `labels`
// (nullopt if there is none). Parses the text format line by line.
std::optional<double> Sample(const std::string& exposition, const std::string& name,
                             const Labels& labels = {});

// The `<family>_bucket` samples whose labels include every pair of `labels`, as one histogram's
// cumulative buckets (le from each sample's `le`), in exposition order; empty if there are none.
std::vector<CumulativeBucket> HistogramBuckets(const std::string& exposition,
                                               const std::string& family,
                                               const Labels& labels = {});

// GET /metrics from the agent's admin port ("" if it does not answer 200).
std::string ScrapeMetrics(int admin_port);

// Sample() on a fresh scrape, or -1 when the series is missing.
double MetricNow(int admin_port, const std::string& name, const Labels& labels = {});

}  // namespace lw::test
