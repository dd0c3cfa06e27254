#include "locking/handoff.h"

#include <algorithm>

#include "core/redlock_math.h"
#include "locking/holder.h"
#include "locking/waiters.h"

namespace lw {

HandOffCase HandOffCaseOf(const Holder& prev, const Waiter* next,
                          std::chrono::steady_clock::time_point now) {
  HandOffCase c;
  c.released_fenced = prev.fence.has_value();
  c.released_extending = prev.extends_in_flight > 0;
  c.released_ttl_ms = prev.ttl_ms;
  c.left_ms = MsLeft(prev.valid_until, now);
  c.lease = prev.kept;
  if (next != nullptr) {
    c.lease = c.lease || next->hold_as != 0;
    // Only into the same part of the resource (the same mode).
    c.next_waiting = !next->cancelled && !next->in_attempt && next->mode == prev.mode;
    c.next_fenced = next->history.fence;
    c.next_ttl_ms = next->history.ttl_ms;
  }
  return c;
}

bool MayHandOff(const HandOffCase& c) {
  if (c.engine_stopping || c.attempt_in_flight || c.released_fenced || c.released_extending ||
      c.lease || (c.turns && !c.next_first)) {
    return false;
  }
  return c.next_waiting && !c.next_fenced && c.next_ttl_ms == c.released_ttl_ms &&
         c.left_ms > 0 && c.left_ms >= c.next_ttl_ms / 2;
}

bool MayGoBeforeOthers(std::chrono::steady_clock::time_point came, const OthersHeard& heard,
                       std::chrono::steady_clock::time_point now, int64_t window_ms) {
  if (!heard.asked) return false;
  if (heard.waited_ms < 0) return came < heard.at || now - heard.at < std::chrono::milliseconds(window_ms);
  return came < heard.at && came <= heard.at - std::chrono::milliseconds(heard.waited_ms);
}

int64_t HandOffDelayMs(bool renew, int64_t ttl_ms, int64_t left_ms) {
  return renew ? std::max<int64_t>(0, left_ms - 2 * ttl_ms / 3) : left_ms;
}

}  // namespace lw
