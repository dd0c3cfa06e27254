#pragma once
// Snapshot: the agent's state as other threads may see it. The loop thread builds one every
// ~250 ms and publishes it; HTTP handlers and the presence probe read the latest without ever
// touching loop-owned state.
//
// Its lists are bounded whatever the locks held: the locks an operator looks at first (at most
// kMaxListedLocks, stuck first: ResourceTable::ListedLocks) and the waiters (kMaxListedWaiters);
// the counts say how many there are in all. The listed locks and their grants are built only
// while a reader has asked for them in the last few seconds (the state API, the presence
// probe); a reader that needs them asks, then waits for the next detailed snapshot.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/lock_view.h"
#include "core/quorum_state.h"
#include "redis/node.h"

namespace lw {

struct Snapshot {
  std::chrono::steady_clock::time_point taken;
  int64_t taken_unix_ms = 0;
  int quorum = 0;
  std::vector<NodeStatus> masters;
  int masters_up = 0;
  int masters_usable = 0;  // up and not in restart quarantine: their votes count
  size_t locks_held = 0;
  // The agent's event loop in the last 10 s (observe/loop_monitor.h): the largest lag of a
  // timer and the longest turn, in ms.
  double loop_lag_max_ms = 0;
  double loop_turn_max_ms = 0;
  bool detailed = false;  // locks and listed_grants are filled in (see the top of this file)
  // At most kMaxListedLocks (locks_held counts them all): the stuck first, then the longest
  // held, each with its holder's peer.
  std::vector<LockView> locks;
  size_t sessions = 0;
  size_t waiters = 0;
  int64_t oldest_wait_ms = 0;  // how long the longest-queued acquire has waited (0: none)
  // Every acquire queued here, longest waiting first, each with its peer; at most
  // kMaxListedWaiters (waiters counts them all). Always filled: waiters are few.
  std::vector<WaiterView> waiter_list;
  // {key, value on the masters} of each of `locks`, in the same order: for the presence probe
  // only, never shown.
  std::vector<std::pair<std::string, std::string>> listed_grants;
};

// The counts of masters that decide the quorum's state (core/quorum_state.h).
inline QuorumCounts QuorumOf(const Snapshot& s) {
  return {static_cast<int>(s.masters.size()), s.masters_up, s.masters_usable, s.quorum};
}

// Whether the agent can grant a lock: enough masters up and out of restart quarantine to reach
// the quorum (QuorumReady, the rule behind every front's quorum state).
struct Readiness {
  bool ready = false;
  // "5 of 5 masters up (2 in restart quarantine), 3 usable, quorum 3": the counts that decide.
  std::string reason;
};

inline Readiness ReadinessOf(const Snapshot& s) {
  const QuorumCounts counts = QuorumOf(s);
  return {QuorumReady(counts), DescribeQuorum(counts)};
}

inline constexpr size_t kMaxListedWaiters = 1000;
inline constexpr size_t kMaxListedLocks = 1000;

class SnapshotBox {
 public:
  using Clock = std::chrono::steady_clock;
  // How long one request for detail keeps the loop building it.
  static constexpr std::chrono::seconds kDetailFor{5};

  void Publish(std::shared_ptr<const Snapshot> snapshot) {
    {
      std::lock_guard lock(mu_);
      if (snapshot->detailed) {
        detailed_ = snapshot;
      } else {
        detailed_.reset();  // nobody asked for a while: do not keep tens of MiB for nobody
      }
      current_ = std::move(snapshot);
    }
    published_.notify_all();
  }
  // Null until the first Publish.
  std::shared_ptr<const Snapshot> Latest() const {
    std::lock_guard lock(mu_);
    return current_;
  }

  // Loop thread: should the snapshot being built carry the per-lock detail?
  bool DetailWanted() const {
    return Clock::now().time_since_epoch().count() < detail_until_.load(std::memory_order_relaxed);
  }

  // Any thread: the latest detailed snapshot taken after `after`, waiting up to `wait` for
  // the loop to build one; null if none comes in time (the loop is busy or stopping).
  std::shared_ptr<const Snapshot> LatestDetailed(Clock::time_point after,
                                                 Clock::duration wait) const {
    detail_until_.store((Clock::now() + kDetailFor).time_since_epoch().count(),
                        std::memory_order_relaxed);
    std::unique_lock lock(mu_);
    const bool fresh =
        published_.wait_for(lock, wait, [&] { return detailed_ && detailed_->taken > after; });
    return fresh ? detailed_ : nullptr;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable published_;
  std::shared_ptr<const Snapshot> current_;
  std::shared_ptr<const Snapshot> detailed_;  // the latest with detail
  mutable std::atomic<Clock::rep> detail_until_{0};
};

}  // namespace lw
