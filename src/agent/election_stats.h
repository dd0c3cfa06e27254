#pragma once
// ElectionStats: what Elections counts (docs/metrics.md), declared where it is counted. The
// leaders themselves are holds: lockwarden_holds{mode="exclusive"} and the engine's series count
// them with every lock.

#include <array>
#include <string_view>

#include "core/leadership.h"
#include "stats/stats.h"

namespace lw {

inline constexpr std::array<std::string_view, 3> kLeaderReadingNames = {"leader", "none",
                                                                         "unknown"};

struct ElectionStats {
  explicit ElectionStats(stats::Registry& r) : r_(r) {}

  stats::Registry& r_;
  stats::ByEnum<stats::Counter, LeaderReading::State, 3> reads{
      r_, "lockwarden_election_reads_total",
      "Leader reads from the masters (leader, observe, announcements and polls), by what they "
      "found: a leader, nobody, or unknown (too few masters agreed).",
      "result", kLeaderReadingNames};
  stats::Counter events{r_, "lockwarden_election_events_total",
                        "Leader events pushed to observing sessions."};
  stats::Counter events_missed{
      r_, "lockwarden_election_events_missed_total",
      "Leader events pushed with missed: true (the observer may have missed changes)."};
  stats::Gauge observed{r_, "lockwarden_elections_observed",
                        "Elections observed by this agent's sessions: each is read again at every "
                        "announced change and every election_poll_ms."};
};

}  // namespace lw
