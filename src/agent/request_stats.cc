#include "agent/request_stats.h"

#include <tuple>

namespace lw {

RequestStats::RequestStats(stats::Registry& r) : r_(r) {
  // Present from the start, so that rate() over them works before the first request.
  for (const char* op : {"acquire", "release", "extend"}) RequestsOf(op);
}

stats::Counter& RequestStats::RequestsOf(std::string_view op) {
  auto it = requests_.find(op);
  if (it == requests_.end()) {
    it = requests_
             .emplace(std::piecewise_construct, std::forward_as_tuple(op),
                      std::forward_as_tuple(r_, "lockwarden_requests_total",
                                            "Requests received on the socket, by op.",
                                            stats::Labels{{"op", std::string(op)}}))
             .first;
  }
  return it->second;
}

void RequestStats::Received(std::string_view op) { RequestsOf(op).Inc(); }

void RequestStats::Failed(std::string_view op, ErrorCode code) {
  auto key = std::make_pair(std::string(op), code);
  auto it = failures_.find(key);
  if (it == failures_.end()) {
    const stats::Labels labels = {{"op", key.first}, {"reason", std::string(ErrorCodeName(code))}};
    it = failures_
             .emplace(std::piecewise_construct, std::forward_as_tuple(key),
                      std::forward_as_tuple(r_, "lockwarden_failures_total", kFailuresHelp,
                                            labels))
             .first;
  }
  it->second.Inc();
}

}  // namespace lw
