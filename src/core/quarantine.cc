#include "core/quarantine.h"

#include <algorithm>

#include "core/duration.h"

namespace lw {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// Far beyond any real uptime, and small enough that the subtraction cannot overflow.
constexpr int64_t kMaxUptimeS = 1'000'000'000;

std::string Short(const std::string& run_id) { return run_id.substr(0, 8); }

int64_t CeilMs(std::chrono::steady_clock::duration d) {
  const auto ms = duration_cast<milliseconds>(d);
  return (ms < d ? ms + milliseconds(1) : ms).count();
}

}  // namespace

QuarantineVerdict JudgeSighting(const MasterSighting& now, const PreviousSighting& before,
                                milliseconds max_ttl) {
  QuarantineVerdict v;
  const auto uptime = std::chrono::seconds(std::clamp<int64_t>(now.uptime_s, 0, kMaxUptimeS));
  // uptime_in_seconds = floor(now) - floor(start) < real uptime + 1 s; and it started before
  // it answered.
  v.started_at = std::min(now.answered_at, now.answered_at - uptime + std::chrono::seconds(1));
  if (!before.run_id.empty() && before.run_id == now.run_id) {
    v.start_moved_later = v.started_at > before.started_at + kUptimeNoise;
    if (!v.start_moved_later) v.started_at = before.started_at;
  } else if (!before.run_id.empty()) {
    v.restarted = true;
    v.started_at = std::max(v.started_at, before.last_alive_at);
  }
  const auto until = v.started_at + max_ttl;
  if (until <= now.answered_at) return v;
  v.until = until;
  if (v.restarted) {
    v.previous_run_id = Short(before.run_id);
    v.run_id = Short(now.run_id);
  }
  return v;
}

QuarantineVerdict UnknownStart(std::chrono::steady_clock::time_point answered_at,
                               const std::string& why, milliseconds max_ttl) {
  QuarantineVerdict v;
  v.started_at = answered_at;
  v.until = answered_at + max_ttl;
  v.unknown_start = why;
  return v;
}

std::string QuarantineReason(const QuarantineVerdict& v, std::chrono::steady_clock::time_point now) {
  if (!v.until) return "";
  const int64_t length = CeilMs(*v.until - v.started_at);
  const int64_t left = std::clamp<int64_t>(CeilMs(*v.until - now), 0, length);
  const std::string ago = FormatDurationMsUp(length - left) + " ago";
  const std::string counts = "counts once up " + FormatDurationMs(length) + " (max_ttl_ms)";
  if (!v.unknown_start.empty()) {
    return v.unknown_start + ": when it started is unknown, so it counts " +
           FormatDurationMs(length) + " (max_ttl_ms) after it was first seen, " + ago;
  }
  if (!v.previous_run_id.empty()) {
    return "restarted " + ago + " (run_id " + v.previous_run_id + " became " + v.run_id +
           "), and " + counts + ": it may have forgotten the locks it held";
  }
  return "started " + ago + ", and " + counts + ": it may have forgotten locks it held before a "
         "restart";
}

}  // namespace lw
