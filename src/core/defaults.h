#pragma once
// Defaults that more than one room needs, written once. config/ reads them into Config; the
// rooms below it (protocol, redis, scan, admin) default their own option structs to them so a
// struct built without a Config behaves like an agent started with no settings.

#include <cstdint>

namespace lw {

// The longest ttl a client may ask for, and so how long a (re)started master stays out of the
// quorum (restart quarantine, docs/safety.md §3). A minute: a fresh deployment grants within
// about a minute, and long work holds a short ttl it renews (or extends) rather than a long one.
inline constexpr int64_t kDefaultMaxTtlMs = 60'000;
inline constexpr int64_t kDefaultMinTtlMs = 100;
inline constexpr int64_t kDefaultTtlMs = 30'000;      // an acquire that names no ttl
inline constexpr int64_t kDefaultMaxWaitMs = 300'000;  // the longest wait_ms a client may ask for

}  // namespace lw
