#pragma once
// Restart quarantine: when a master's votes may count again. Pure: no clock is read here;
// every time point is the caller's steady clock.
//
// A master without persistence forgets every lock it held when it restarts. Were its votes
// counted at once, a lock still valid through it could be granted a second time. So a master
// that started less than max_ttl ago, as far as we can tell, does not count toward acquire or
// extend quorum until max_ttl after its start: by then every lock it may have forgotten has
// expired everywhere.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace lw {

// One INFO server answer: who answered (run_id, new on every start) and its uptime.
struct MasterSighting {
  std::chrono::steady_clock::time_point answered_at;  // when the answer arrived
  int64_t uptime_s = 0;                               // uptime_in_seconds (floored)
  std::string run_id;
};

// What we knew of the master before this answer.
struct PreviousSighting {
  std::string run_id;  // "" = never seen: this is the first sight
  // Our estimate of when that run_id started (the started_at of the last verdict).
  std::chrono::steady_clock::time_point started_at;
  // The last moment that run_id was known to be alive (a reply on a connection it answered).
  std::chrono::steady_clock::time_point last_alive_at;
};

struct QuarantineVerdict {
  bool restarted = false;  // the run_id changed since the previous sighting
  // Same run_id, and its start is now estimated later than before by more than Redis's own
  // rounding can explain (its wall clock was stepped back): the quarantine ends later.
  bool start_moved_later = false;
  // When this run_id started, never earlier than the truth (keep it for the next sighting).
  std::chrono::steady_clock::time_point started_at;
  // Until when its votes do not count; nullopt: they count now.
  std::optional<std::chrono::steady_clock::time_point> until;
  // What QuarantineReason names (set when until is): the run_ids of a restart (the first 8
  // characters), or why its start is unknown (UnknownStart).
  std::string previous_run_id;
  std::string run_id;
  std::string unknown_start;
};

// Why the master is quarantined, for people, as of `now` (v.until set and after now): how long
// ago it started, and the length of the quarantine, until - started_at (max_ttl_ms). E.g. "started
// 12.7s ago, and counts once up 15.0s (max_ttl_ms): it may have forgotten locks it held before a
// restart". The time since its start is that length minus the time left, CeilMs(until - now),
// rounded up where FormatDurationMs rounds the time left down, so that the two, printed side by
// side ("counts again in 2.3s: started 12.7s ago"), add up to the length printed.
std::string QuarantineReason(const QuarantineVerdict& v, std::chrono::steady_clock::time_point now);

// The start is estimated as answered_at - uptime_s + 1 s, but never after answered_at, and never
// earlier than the real start: Redis computes uptime as the difference of two whole-second
// clock readings (now and its start, each floored), which overstates the real uptime by less
// than a second; and the answer is seen after it was written.
// For the same run_id as before, the previous estimate is kept unless this one is later by more
// than kUptimeNoise (a wall clock stepped back makes Redis report a smaller uptime; the
// estimate only moves later, never earlier). Within that band the estimates differ only by
// Redis's rounding and its cached clock, and moving the end by it would make the countdown
// people read in the log and in `status` disagree. For a new run_id, the start is at least the
// last moment the old one was seen alive: Redis computes uptime from its wall clock, which may
// have been stepped. Quarantined until started_at + max_ttl when that is after answered_at.
inline constexpr std::chrono::milliseconds kUptimeNoise{2500};
QuarantineVerdict JudgeSighting(const MasterSighting& now, const PreviousSighting& before,
                                std::chrono::milliseconds max_ttl);

// When INFO server cannot tell (refused, renamed, or without run_id/uptime): quarantined for
// max_ttl from answered_at, the reason saying why.
QuarantineVerdict UnknownStart(std::chrono::steady_clock::time_point answered_at,
                               const std::string& why, std::chrono::milliseconds max_ttl);

}  // namespace lw
