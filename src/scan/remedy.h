#pragma once
// Operator remedies for a leaked key: give it a TTL, or delete it — only if it still has no
// TTL at that moment (checked and done atomically by a Lua script on the master), so a key
// that became a live lock in the meantime is never touched.

#include <chrono>
#include <cstdint>
#include <string>

#include "core/master_address.h"

namespace lw {

enum class LeakAction { kExpire, kDelete };
enum class RemedyResult { kDone, kStale, kError };

struct Remedy {
  RemedyResult result = RemedyResult::kError;
  std::string message;  // for people
};

// Blocking (own connection, bounded by the timeouts). ttl_ms is used by kExpire only.
Remedy RemedyLeak(const MasterAddress& master, const std::string& key, LeakAction action,
                  int64_t ttl_ms, std::chrono::milliseconds timeout);

std::string_view RemedyResultName(RemedyResult result);  // "done", "stale", "error"

}  // namespace lw
