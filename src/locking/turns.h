#pragma once
// Turns with other agents (docs/safety.md, "Fair turns"): what a resource's acquires, local
// hand-offs and releases do so that waiters on other agents are served in their turn. An
// attempt that takes turns tells the masters how long its waiter has waited and, refused, may
// leave this agent queued there; a grant hears how long other agents wait; a release reserves
// the lock for the agent that has waited longest; a local hand-off goes ahead of other agents
// only when its waiter came first. Turns decides and builds the rounds; the engine runs them and
// keeps each resource's TurnState. Pure logic: no I/O, loop thread only.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "locking/engine_options.h"
#include "locking/handoff.h"
#include "locking/kinds/kind.h"
#include "locking/rounds.h"

namespace lw {

// A resource's part in taking turns.
struct TurnState {
  // This agent may have a queue entry on a master: an attempt that takes turns was refused (or
  // unheard) somewhere since the last Leave.
  bool queued = false;
  OthersHeard others;   // what the last round that asked heard of other agents' waiters
  bool asking = false;  // a QueueHead round (Ask) is in flight
};

class Turns {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Turns(const EngineOptions& options) : options_(options) {}

  // Do holds of `mode` of kind k take turns with other agents (not local_first, and the kind
  // does)?
  bool Take(const Kind& k, HoldMode mode) const {
    return !options_.local_first && k.TakesTurns(mode);
  }
  // How long a master keeps the sign that a waiter of this agent waits: a few retry delays
  // (each attempt refreshes it).
  int64_t WaitingTtlMs() const;

  // An attempt of a waiter that takes turns ended with tally t, granted or not retried at once
  // (a refusal retried at once, a free permit named, queued it nowhere): a master that refused
  // it (or may have, unheard) may have queued this agent there.
  static void AttemptEnded(TurnState& s, const VoteTally& t);
  // A grant's first round ended: what it heard of waiters elsewhere, if it asked and every
  // master that granted said.
  static void GrantHeard(TurnState& s, bool asked, const RoundResult& res);

  // A local hand-off of a hold of `mode` to a waiter that came at `came`: sets c.turns and
  // c.next_first. True: hand over and ask the masters again beside it (Ask), since nobody
  // waited elsewhere when last heard but that was a window ago.
  bool HandOff(const TurnState& s, const Kind& k, HoldMode mode, Clock::time_point came,
               Clock::time_point now, HandOffCase& c) const;

  // The release round of a hold of `mode` at p (value: its lease value on the masters): in turn
  // when it takes turns, saying how long this agent's next waiter (next_mode, came: if one
  // waits) has waited.
  RoundRequest Release(const Kind& k, const HoldPlace& p, const std::string& value,
                       HoldMode mode, std::optional<HoldMode> next_mode,
                       Clock::time_point came) const;

  // The round that asks every master how long other agents wait (its result goes to Heard), or
  // nothing when one is in flight. p: the resource's base place.
  std::optional<RoundRequest> Ask(TurnState& s, const HoldPlace& p) const;
  static void Heard(TurnState& s, const RoundResult& res);
  // The round that removes this agent's queue entry from every master, or nothing when it has
  // none. p: the resource's base place.
  std::optional<RoundRequest> Leave(TurnState& s, const HoldPlace& p) const;

 private:
  // How long a release's reservation waits for its agent's claim: long enough for a waiter
  // backing off to hear the release (or its retry to come) and for its claim to arrive.
  int64_t ReserveMs() const;
  // How long after a grant that heard nobody waiting elsewhere local hand-offs go on without
  // asking the masters again (MayGoBeforeOthers): a waiter elsewhere retries about that often.
  int64_t HandOffWindowMs() const;

  const EngineOptions& options_;
};

}  // namespace lw
