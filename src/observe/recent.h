#pragma once
// What the operator page shows besides the current state: recent events and the last 15
// minutes of acquire outcomes. Both keep a fixed amount of memory whatever the traffic.
// Time is always passed in (Unix ms), so both are testable without a clock.

#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "locking/engine_events.h"

namespace lw {

enum class Severity { kInfo, kWarning, kError };
std::string_view SeverityName(Severity s);

struct Event {
  int64_t at_unix_ms = 0;
  std::string kind;     // lock_lost, master_down, master_up, acquire_failed, admin
  Severity severity = Severity::kInfo;
  std::string message;  // for people
  int count = 1;        // > 1: identical events coalesced
};

// Thread-safe (the loop records lock and master events, admin threads record actions).
// Noisy events (failed acquires, which contention can produce by the thousand) live in a
// ring of their own, so they never push a master going down out of the list; and a noisy
// event identical to a recent one (same coalesce key within a minute) only bumps its count.
class EventLog {
 public:
  static constexpr size_t kNotableCapacity = 150;
  static constexpr size_t kNoisyCapacity = 50;
  static constexpr int64_t kCoalesceMs = 60'000;

  void Add(Event event);
  // coalesce_key: events with equal keys are the same event happening again.
  void AddNoisy(Event event, const std::string& coalesce_key);
  // Both rings, newest first.
  std::vector<Event> Recent() const;

 private:
  struct Noisy {
    Event event;
    std::string key;
  };
  mutable std::mutex mu_;
  std::deque<Event> notable_;
  std::deque<Noisy> noisy_;
};

struct HistoryPoint {
  int64_t t_unix_ms = 0;  // bucket start
  std::array<uint64_t, static_cast<size_t>(AcquireOutcome::kCount)> outcomes{};
  std::optional<double> wait_p99_ms;  // none: nothing finished in the bucket
};

// Acquire outcomes and waits in fixed buckets (5 s × 180 = 15 min). Waits go into a
// log-scale histogram per bucket (bins 19% wide), so p99 is exact to within one bin.
// Not thread-safe: the loop records and reads it.
class AcquireHistory {
 public:
  static constexpr int64_t kBucketMs = 5'000;
  static constexpr size_t kBuckets = 180;

  void Record(int64_t now_unix_ms, AcquireOutcome outcome, double wait_ms);
  // Every bucket of the window ending at now, oldest first; the last is the current one
  // (partial). Buckets with no traffic are present with zero counts.
  std::vector<HistoryPoint> Points(int64_t now_unix_ms) const;

  static constexpr size_t kBins = 96;
  // Bin of a wait, and the upper edge of a bin (what p99 reports).
  static size_t BinOf(double wait_ms);
  static double BinUpperMs(size_t bin);

 private:
  struct Bucket {
    int64_t start = -1;  // -1: never used
    std::array<uint64_t, static_cast<size_t>(AcquireOutcome::kCount)> outcomes{};
    std::array<uint32_t, kBins> waits{};
  };
  std::array<Bucket, kBuckets> ring_{};
};

}  // namespace lw
