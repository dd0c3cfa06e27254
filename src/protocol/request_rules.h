#pragma once
// What makes a request's values acceptable, beyond their JSON types: the one definition both
// decoders use (the strict DecodeRequest and the hot ops' DecodeHotRequest), so that they can
// never disagree on a bound, a default or a combination. Resource names are checked by
// ResourceNameProblem (core/resource_name.h) and tokens by IsWellFormedToken (core/token.h).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/lock_kind.h"
#include "protocol/messages.h"

namespace lw::protocol {

// A string id is echoed back, so it is refused above this many bytes.
inline constexpr size_t kMaxIdBytes = 128;

// An optional whole-number field: the values it admits and the value it takes when absent.
struct IntRule {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t fallback = 0;

  bool Admits(int64_t value) const { return value >= lo && value <= hi; }
};

// ttl_ms of acquire, extend and campaign.
inline IntRule TtlRule(const Limits& limits) {
  return {limits.min_ttl_ms, limits.max_ttl_ms, limits.default_ttl_ms};
}
// wait_ms of acquire: absent, it does not wait.
inline IntRule AcquireWaitRule(const Limits& limits) { return {0, limits.max_wait_ms, 0}; }
// wait_ms of campaign: absent, it waits as long as the agent allows.
inline IntRule CampaignWaitRule(const Limits& limits) {
  return {0, limits.max_wait_ms, limits.max_wait_ms};
}
// permits of acquire: absent (0), the hold is not a semaphore's.
inline constexpr IntRule kPermitsRule{1, kMaxPermits, 0};
// permit of resume: which of the semaphore's permits (absent: -1, none).
inline constexpr IntRule kPermitRule{0, kMaxPermits - 1, -1};
// fence of resume: the grant's (absent: 0, none; fences start at 1).
inline constexpr IntRule kFenceRule{1, INT64_MAX, 0};
// An acquire's owner: who inside the connection asks (a thread, a task); whole numbers a
// JavaScript client can send exactly. 0 (absent): the connection itself.
inline constexpr IntRule kOwnerRule{0, (int64_t{1} << 53) - 1, 0};
// A resumed reentrant hold's depth (how many acquires it stands for).
inline constexpr IntRule kDepthRule{1, 65535, 1};

// The combinations of acquire's fields that are refused, each checked once the fields it
// involves are read: why (a message for the client), or nullopt when the request is fine.
// shared_sent: "shared" was present, whatever its value.
std::optional<std::string> SharedConflict(const AcquireRequest& request, bool shared_sent);
std::optional<std::string> DetachConflict(const AcquireRequest& request);
// A resume's: permit goes with permits, shared without them, a fence not with shared.
std::optional<std::string> ResumeConflict(const ResumeRequest& request, bool shared_sent);

}  // namespace lw::protocol
