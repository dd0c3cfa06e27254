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

std::string Ago(std::chrono::steady_clock::duration d) {
  const int64_t ms = duration_cast<milliseconds>(d).count();
  return ms < 1000 ? "just now" : FormatDurationMs(ms) + " ago";
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
  const std::string ago = Ago(now.answered_at - v.started_at);
  if (v.restarted) {
    v.reason = "restarted " + ago + " (run_id " + Short(before.run_id) + " became " +
               Short(now.run_id) + "); may have forgotten the locks it held";
  } else {
    v.reason = "started " + ago + "; may have forgotten locks it held before a restart";
  }
  return v;
}

QuarantineVerdict UnknownStart(std::chrono::steady_clock::time_point answered_at,
                               const std::string& why, milliseconds max_ttl) {
  QuarantineVerdict v;
  v.started_at = answered_at;
  v.until = answered_at + max_ttl;
  v.reason = why + ": when it started is unknown, so it counts only after max_ttl (" +
             FormatDurationMs(max_ttl.count()) + ")";
  return v;
}

}  // namespace lw
