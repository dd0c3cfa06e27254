#include "cli/quorum_report.h"

#include <cstdio>

#include "core/duration.h"

namespace lw::cli {

QuorumCounts QuorumOfHealth(const nlohmann::json& health) {
  QuorumCounts counts;
  counts.quorum = health.value("quorum", 0);
  for (const auto& n : health.value("nodes", nlohmann::json::array())) {
    const bool up = n.value("up", false);
    ++counts.masters;
    counts.up += up;
    counts.usable += up && !n.value("quarantined", false);
  }
  return counts;
}

std::string QuorumVerdict(const QuorumCounts& counts) {
  const QuorumState state = QuorumStateOf(counts);
  const int margin = QuorumMargin(counts);
  std::string text = std::string(QuorumStateName(state)) + ", margin " + std::to_string(margin);
  if (state == QuorumState::kLost) return text + " (no lock can be granted or renewed)";
  if (margin == 0) return text + " (one more master failure stops locking)";
  return text + " (" + std::to_string(margin) + " more " + (margin == 1 ? "master" : "masters") +
         " may fail before locking stops)";
}

void SayIfWaitingForQuorum(client::Client& c, const std::string& doing, int64_t wait_ms) {
  const QuorumCounts counts = QuorumOfHealth(c.Health());
  if (QuorumReady(counts)) return;
  const std::string how_long = wait_ms < 0    ? "up to the agent's max_wait_ms (no --wait)"
                               : wait_ms == 0 ? "one attempt (--wait 0s)"
                                              : "up to " + FormatDurationMs(wait_ms) + " (--wait)";
  std::fprintf(stderr, "lockwarden: waiting for a quorum of masters to %s (%s): %s\n",
               doing.c_str(), DescribeQuorum(counts).c_str(), how_long.c_str());
}

}  // namespace lw::cli
