#include "locking/fencing.h"

#include <spdlog/spdlog.h>

#include "locking/failure_text.h"

namespace lw {

namespace {

RoundRequest FencedRound(RoundOp op, const FencedKeys& keys, const std::string& token, int needed) {
  RoundRequest req;
  req.op = op;
  req.key = keys.key;
  req.token = token;
  req.fence_key = keys.fence_key;
  req.needed = needed;
  return req;
}

}  // namespace

RoundRequest FencePhase2(const FencedKeys& keys, const std::string& token, int64_t fence,
                         int needed) {
  RoundRequest req = FencedRound(RoundOp::kRaiseFenceIfHeld, keys, token, needed);
  req.fence = fence;
  return req;
}

void CountFenceWrite(EngineStats& stats, const RoundResult& result, std::string_view resource,
                     int64_t fence) {
  stats.fence_rounds[result.tally.Won() ? FenceOutcome::kWritten : FenceOutcome::kNotConfirmed]
      .Inc();
  if (result.fence_refused > 0) {
    stats.fence_rounds[FenceOutcome::kCounterAhead].Inc();
    // Only possible if a counter was raised outside lockwarden, or a master that confirmed
    // an earlier fence lost its data while others did too (docs/safety.md).
    spdlog::error("fence {} for {} refused by {} master(s) whose counter was already at or "
                  "above it; not granted with that fence",
                  fence, Quoted(resource), result.fence_refused);
  }
}

}  // namespace lw
