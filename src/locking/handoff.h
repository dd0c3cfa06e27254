#pragma once
// Local hand-off: a release with a local waiter next in line may give it the masters' key as
// it is, with no round trip (the key stays set; docs/safety.md). Decided here, as a pure
// function of the lock being released and the waiter next in line.

#include <chrono>
#include <cstdint>

namespace lw {

// What the last grant through the masters heard of waiters on other agents (docs/safety.md,
// "Fair turns"): nothing (`asked` false), or that none had waited longer than `waited_ms` (-1:
// none waited) as of `at` (when that grant's round started).
struct OthersHeard {
  bool asked = false;
  int64_t waited_ms = -1;
  std::chrono::steady_clock::time_point at{};
};

// Whether a waiter that came at `came` may be handed the lock at `now` ahead of waiters on other
// agents: it is known to have come before every one of them (before the round that heard them,
// and before the longest waiting; one that comes to another agent later is queued later), or
// nobody waited elsewhere as of that round and it started less than `window_ms` ago (a waiter
// elsewhere that came since then gives way to at most `window_ms` of hand-offs).
bool MayGoBeforeOthers(std::chrono::steady_clock::time_point came, const OthersHeard& heard,
                       std::chrono::steady_clock::time_point now, int64_t window_ms);

struct HandOffCase {
  bool engine_stopping = false;    // shutting down: nothing is granted any more
  bool attempt_in_flight = false;  // the resource has a Redlock round in flight
  // The lock being released.
  bool released_fenced = false;
  bool released_extending = false;  // an extend round is unanswered: the key's expiry may move
  int64_t released_ttl_ms = 0;
  int64_t left_ms = 0;  // of its validity, rounded down
  // The waiter next in line.
  bool next_waiting = false;  // there is one, with no attempt in flight and not cancelled
  bool next_fenced = false;
  int64_t next_ttl_ms = 0;
  // Turns (docs/safety.md, "Fair turns"): the hold takes turns with other agents, and whether
  // `next` is known to have come before every waiter on another agent.
  bool turns = false;
  bool next_first = false;
  // Either is a detached lease: its holder knows its own token only, and names the key's value
  // by it through any agent, so the key is never handed on with another token in it.
  bool lease = false;
};

struct Holder;
struct Waiter;
// The case of `prev` released at `now` with `next` (null: none) first in line; the engine's own
// state (engine_stopping, attempt_in_flight) and the turns are left for the caller to fill.
HandOffCase HandOffCaseOf(const Holder& prev, const Waiter* next,
                          std::chrono::steady_clock::time_point now);

// True when the next waiter may take over the key: neither lock is fenced nor a detached lease (a fenced grant
// needs a new fence from the masters), nothing may change the key meanwhile, the waiter asked
// for the same ttl (the key was set for it) and at least half of it is left; and, where holds
// take turns, the waiter came before every waiter on another agent.
bool MayHandOff(const HandOffCase& c);

// The first deadline of a lock handed over with left_ms of validity: a renewal is due when two
// thirds of the ttl are left, as for a fresh grant; otherwise the end of its validity.
int64_t HandOffDelayMs(bool renew, int64_t ttl_ms, int64_t left_ms);

}  // namespace lw
