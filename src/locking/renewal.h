#pragma once
// Renewals: when held locks are renewed, how many renewal rounds may be in flight at once, and
// the backlog of those waiting for a slot. Knows nothing of what is renewed: a renewal is a
// (resource name, holder serial) pair the owner checks again when its turn comes.
//
// A wave of renewals (locks taken in a burst come due in a burst) waits for a slot instead of
// all going out at once: memory and master queues stay bounded, and each renewal is still sent
// within milliseconds. Waiting renewals go out oldest first: those are nearest to the end of
// their validity.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>

namespace lw {

// Delay from a grant or extension to the first renewal (or to the end of a non-renewed lock's
// validity): a third of the ttl, never past the validity.
int64_t RenewDelayMs(bool renew, int64_t ttl_ms, int64_t validity_ms);

// The same for a hold taken over with left_ms of validity (an in-place upgrade): renewed when
// a grant's renewal would come, as two thirds of the ttl are left, at once when that is past;
// a non-renewed one ends with its validity.
int64_t AdoptedDelayMs(bool renew, int64_t ttl_ms, int64_t left_ms);

// How long a renewal round waits for the masters when `left_ms` of validity is left: half of
// it, at least the node timeout, at most 2 s (or the node timeout if longer). A renewal has
// until the validity ends, not a client waiting on it: under a burst of renewals a short
// timeout would fail rounds whose answers are merely queued, and the retries deepen the queue.
int64_t RenewRoundTimeoutMs(int64_t left_ms, int64_t node_timeout_ms);

// When to retry a renewal that did not reach quorum, `left_ms` before the validity ends:
// spread out (unit_random in [0, 1)), since a fixed short delay would make every lock of a
// struggling master retry in lockstep; within [1, left_ms].
int64_t RenewRetryDelayMs(int64_t left_ms, int64_t retry_delay_ms, int64_t retry_jitter_ms,
                          double unit_random);

class RenewalSlots {
 public:
  static constexpr size_t kMaxInFlight = 256;
  using Renew = std::function<void(const std::string& name, uint64_t serial)>;

  // A renewal is due: must it wait in the backlog? (No slot free, or older ones waiting.)
  bool MustWait() const {
    return in_flight_ >= kMaxInFlight || (!backlog_.empty() && !draining_);
  }
  // Queues it; true if a slot is free, so the owner should Drain soon.
  bool Wait(std::string name, uint64_t serial);
  void Started() { ++in_flight_; }
  // A renewal round ended; true if some are waiting (the owner should Drain soon).
  bool Ended();
  // Hands waiting renewals to `renew` while slots are free; `renew` may start one (Started)
  // or find it no longer applies.
  void Drain(const Renew& renew);
  void Clear() { backlog_.clear(); }

  // Logs that a renewal of `name` failed (why), at most one line a second: when a master
  // majority is out every renewed lock fails at once, and a line each would flood the log.
  void WarnFailed(const std::string& name, const std::string& why);

 private:
  size_t in_flight_ = 0;
  bool draining_ = false;  // Drain is sending: renewals it starts do not queue behind itself
  std::deque<std::pair<std::string, uint64_t>> backlog_;
  std::chrono::steady_clock::time_point last_warning_{};
  uint64_t warnings_suppressed_ = 0;
};

}  // namespace lw
