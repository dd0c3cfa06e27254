#pragma once
// The quorum's state in one word, from the counts of masters: the one rule behind /readyz,
// systemd's READY=1, the page, /api/v1/state, `lockwarden status` and the CLI's "waiting for a
// quorum", so that they never disagree. Pure: counts in, words out.

#include <string>
#include <string_view>

namespace lw {

struct QuorumCounts {
  int masters = 0;  // configured
  int up = 0;       // answering
  int usable = 0;   // up and out of restart quarantine: their votes count
  int quorum = 0;   // votes a grant needs (0: not known yet)
};

enum class QuorumState {
  kHealthy,  // every master usable
  kAtRisk,   // some master is not usable, but a quorum is (the margin says how many more may go)
  kLost,     // fewer than a quorum usable: no lock can be granted or renewed
};

// A quorum of usable masters: a lock can be granted.
bool QuorumReady(const QuorumCounts& c);
QuorumState QuorumStateOf(const QuorumCounts& c);
// "healthy", "at_risk", "lost": the word every front shows.
std::string_view QuorumStateName(QuorumState state);
// How many more masters may stop counting before the quorum is lost (negative: lost already).
int QuorumMargin(const QuorumCounts& c);
// "4 of 5 masters up (1 in restart quarantine), 3 usable, quorum 3": the counts that decide.
std::string DescribeQuorum(const QuorumCounts& c);

}  // namespace lw
