#include "core/quorum_state.h"

namespace lw {

bool QuorumReady(const QuorumCounts& c) { return c.quorum > 0 && c.usable >= c.quorum; }

QuorumState QuorumStateOf(const QuorumCounts& c) {
  if (!QuorumReady(c)) return QuorumState::kLost;
  if (c.usable < c.masters) return QuorumState::kAtRisk;
  return QuorumState::kHealthy;
}

std::string_view QuorumStateName(QuorumState state) {
  switch (state) {
    case QuorumState::kHealthy:
      return "healthy";
    case QuorumState::kAtRisk:
      return "at_risk";
    case QuorumState::kLost:
      return "lost";
  }
  return "lost";
}

int QuorumMargin(const QuorumCounts& c) { return c.usable - c.quorum; }

std::string DescribeQuorum(const QuorumCounts& c) {
  std::string text = std::to_string(c.up) + " of " + std::to_string(c.masters) + " masters up";
  const int quarantined = c.up - c.usable;
  if (quarantined > 0) text += " (" + std::to_string(quarantined) + " in restart quarantine)";
  return text + ", " + std::to_string(c.usable) + " usable, quorum " + std::to_string(c.quorum);
}

}  // namespace lw
