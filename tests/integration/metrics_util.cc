#include "metrics_util.h"

#include <sstream>

#include "support/http.h"

namespace lw::test {
namespace {

// name{a="x",b="y"} value  ->  name, labels, value. Label values here never hold quotes.
bool ParseSample(const std::string& line, std::string& name, Labels& labels, double& value) {
  if (line.empty() || line[0] == '#') return false;
  const size_t brace = line.find('{');
  const size_t space = line.rfind(' ');
  if (space == std::string::npos) return false;
  labels.clear();
  if (brace != std::string::npos && brace < space) {
    name = line.substr(0, brace);
    const size_t close = line.find('}', brace);
    std::string body = line.substr(brace + 1, close - brace - 1);
    size_t at = 0;
    while (at < body.size()) {
      const size_t eq = body.find('=', at);
      const size_t q1 = body.find('"', eq);
      const size_t q2 = body.find('"', q1 + 1);
      labels[body.substr(at, eq - at)] = body.substr(q1 + 1, q2 - q1 - 1);
      at = q2 + 2;  // past '",'
    }
  } else {
    name = line.substr(0, space);
  }
  value = std::stod(line.substr(space + 1));
  return true;
}

// Calls `found` with the labels and value of each sample named `name` whose labels include every
// pair of `labels`, in exposition order, until it returns false.
template <class F>
void ForEachSample(const std::string& exposition, const std::string& name, const Labels& labels,
                   F found) {
  std::istringstream in(exposition);
  std::string line, sample_name;
  Labels sample_labels;
  double value = 0;
  while (std::getline(in, line)) {
    if (!ParseSample(line, sample_name, sample_labels, value) || sample_name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = sample_labels.find(k);
      match = match && it != sample_labels.end() && it->second == v;
    }
    if (match && !found(sample_labels, value)) return;
  }
}

}  // namespace

std::optional<double> Sample(const std::string& exposition, const std::string& name,
                             const Labels& labels) {
  std::optional<double> first;
  ForEachSample(exposition, name, labels, [&](const Labels&, double value) {
    first = value;
    return false;
  });
  return first;
}

std::vector<CumulativeBucket> HistogramBuckets(const std::string& exposition,
                                               const std::string& family, const Labels& labels) {
  std::vector<CumulativeBucket> buckets;
  ForEachSample(exposition, family + "_bucket", labels, [&](const Labels& l, double value) {
    buckets.push_back({std::stod(l.at("le")), value});  // strtod reads "+Inf"
    return true;
  });
  return buckets;
}

std::string ScrapeMetrics(int admin_port) {
  HttpResult r = HttpGet(admin_port, "/metrics");
  return r.status == 200 ? r.body : "";
}

double MetricNow(int admin_port, const std::string& name, const Labels& labels) {
  return Sample(ScrapeMetrics(admin_port), name, labels).value_or(-1);
}

}  // namespace lw::test
