#pragma once
// Defaults that more than one room needs, written once. config/ reads them into Config; the
// rooms below it (protocol, redis, scan, admin) default their own option structs to them so a
// struct built without a Config behaves like an agent started with no settings.

#include <cstddef>
#include <cstdint>

namespace lw {

// The longest ttl a client may ask for, and so how long a (re)started master stays out of the
// quorum (restart quarantine, docs/safety.md §3). A minute: a fresh deployment grants within
// about a minute, and long work holds a short ttl it renews (or extends) rather than a long one.
inline constexpr int64_t kDefaultMaxTtlMs = 60'000;
inline constexpr int64_t kDefaultMinTtlMs = 100;
inline constexpr int64_t kDefaultTtlMs = 30'000;       // an acquire that names no ttl
inline constexpr int64_t kDefaultMaxWaitMs = 300'000;  // the longest wait_ms a client may ask for

// The most masters an agent takes (the engine tells masters apart by a byte).
inline constexpr size_t kMaxMasters = 255;

// Where locks and fence counters live in Redis.
inline constexpr const char* kDefaultKeyPrefix = "lock:";
inline constexpr const char* kDefaultFencePrefix = "fence:";

// One acquire round: how long a master's answer is awaited, the clock-drift allowance, and the
// pause (plus up to the jitter) before the next attempt.
inline constexpr int64_t kDefaultNodeTimeoutMs = 50;
inline constexpr double kDefaultDriftFactor = 0.01;
inline constexpr int64_t kDefaultRetryDelayMs = 50;
inline constexpr int64_t kDefaultRetryJitterMs = 50;

// Connections to the masters.
inline constexpr int64_t kDefaultConnectTimeoutMs = 1'000;
inline constexpr int64_t kDefaultReconnectMaxBackoffMs = 2'000;
inline constexpr int64_t kDefaultHealthIntervalMs = 1'000;

inline constexpr int64_t kDefaultMaxLineBytes = 65'536;  // the longest request line accepted

// The admin HTTP server: when a lock counts as stuck, and the server's own bounds.
inline constexpr int64_t kDefaultStuckAfterMs = 300'000;
inline constexpr int64_t kDefaultAdminMaxConnections = 32;
inline constexpr int64_t kDefaultAdminTimeoutMs = 5'000;
inline constexpr int64_t kDefaultAdminMaxBodyBytes = 65'536;

// The leak scanner's budget: keys walked per second per master, and SCAN COUNT / PTTL depth.
inline constexpr int64_t kDefaultScanKeysPerSecond = 20'000;
inline constexpr int64_t kDefaultScanBatch = 500;
// Keys a fleet read walks (SCAN, over all masters) per refresh: a sweep of more is spread
// over several reads (fleet/reader.h).
inline constexpr int64_t kDefaultFleetReadBudget = 250'000;

}  // namespace lw
