#pragma once
// Fencing: the two rounds of a fenced acquire (docs/safety.md has the argument).
//   Phase 1 is the acquire round with a fence key (Kind::AcquireRound): one script per
//   master takes the hold and reads the fence counter.
//   Phase 2 writes NextFence(highest counter read) back, in one script that writes only where
//   the key still holds the acquire's token.
// The grant needs `needed` (the fence quorum) yes votes in both phases.

#include <cstdint>
#include <string>
#include <string_view>

#include "locking/engine_stats.h"
#include "locking/rounds.h"

namespace lw {

// Where a resource's lock and fence counter live on the masters.
struct FencedKeys {
  std::string key;
  std::string fence_key;
};

RoundRequest FencePhase2(const FencedKeys& keys, const std::string& token, int64_t fence,
                         int needed);

// The fence a grant gets when the highest counter among phase 1's yes votes was `max_read`
// (-1: none read).
inline int64_t NextFence(int64_t max_read) { return (max_read < 0 ? 0 : max_read) + 1; }

// Counts phase 2's outcome in `stats`, and logs a fence some master refused because its counter
// was already at or above it (never expected; docs/safety.md).
void CountFenceWrite(EngineStats& stats, const RoundResult& result, std::string_view resource,
                     int64_t fence);

}  // namespace lw
