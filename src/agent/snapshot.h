#pragma once
// Snapshot: the agent's state as other threads may see it. The loop thread builds one every
// ~250 ms and publishes it; HTTP handlers and the scanner read the latest without ever
// touching loop-owned state.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "redis/node.h"

namespace lw {

struct LockSnapshot {
  std::string resource;
  uint64_t session = 0;
  int pid = -1;
  int uid = -1;
  int gid = -1;
  int64_t held_ms = 0;
  int64_t validity_ms = 0;
  bool renew = false;
  int waiters = 0;
  int64_t ttl_ms = 0;
  std::string key;      // the Redis key
  std::string cmdline;  // the holder's, when it connected ("" if unknown)
};

struct Snapshot {
  std::chrono::steady_clock::time_point taken;
  int64_t taken_unix_ms = 0;
  int quorum = 0;
  std::vector<NodeStatus> masters;
  int masters_up = 0;
  int masters_usable = 0;  // up and not in restart quarantine: their votes count
  std::vector<LockSnapshot> locks;
  size_t sessions = 0;
  size_t waiters = 0;
  // {key, token} of every grant held: for the scanner only, never shown.
  std::set<std::pair<std::string, std::string>> held_grants;
};

class SnapshotBox {
 public:
  void Publish(std::shared_ptr<const Snapshot> snapshot) {
    std::lock_guard lock(mu_);
    current_ = std::move(snapshot);
  }
  // Null until the first Publish.
  std::shared_ptr<const Snapshot> Latest() const {
    std::lock_guard lock(mu_);
    return current_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> current_;
};

}  // namespace lw
