#pragma once
// Reading a live /metrics exposition in tests.

#include <map>
#include <optional>
#include <string>

namespace lw::test {

using Labels = std::map<std::string, std::string>;

// Value of the first sample named `name` whose labels include every pair of `labels`
// (nullopt if there is none). Parses the text format line by line.
std::optional<double> Sample(const std::string& exposition, const std::string& name,
                             const Labels& labels = {});

// GET /metrics from the agent's admin port ("" if it does not answer 200).
std::string ScrapeMetrics(int admin_port);

// Sample() on a fresh scrape, or -1 when the series is missing.
double MetricNow(int admin_port, const std::string& name, const Labels& labels = {});

}  // namespace lw::test
