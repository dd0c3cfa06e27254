#pragma once
// PresenceProbe: for the operator page, on which masters each grant held through this agent
// really exists. Runs on its own thread with its own blocking connections (one per master,
// opened lazily, dropped on error), and only while someone is looking: each Demand() keeps it
// probing for the next kDemandWindow, after which it closes its connections and idles.
//
// A round: grants() (at most kMaxGrantsPerRound), then per master, one after the other, one
// pipeline of GET for every key (ZSCORE for a read hold's readers set). A master that fails yields kUnknown for all its entries; its
// connection is reopened on a later round, at most once per kRetryPause. Callers of Latest(),
// Demand(), rounds() and idle() never wait for Redis: the mutex only guards the report pointer
// and the demand state, never I/O.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/master_address.h"
#include "redis/blocking_connection.h"
#include "redis/reply.h"

namespace lw {

// held: the key holds our token; other: another token; missing: no key;
// unknown: not checked, master unreachable, or an unexpected reply.
enum class KeyPresence { kUnknown, kHeld, kMissing, kOther };
std::string_view PresenceName(KeyPresence p);  // "unknown", "held", "missing", "other"

// What a GET reply says about a grant with `token`: string == token is held, nil is missing,
// another string is other, an error (WRONGTYPE, ...) or anything else is unknown.
KeyPresence ClassifyPresence(const Reply& reply, const std::string& token);

// How a grant's key is read: a read hold's key is its resource's readers set (core/lock_kind.h),
// read with ZSCORE key token; every other hold's key with GET key.
Command PresenceCommand(const std::string& key, const std::string& token);
// What the reply of PresenceCommand says: for GET as ClassifyPresence; for ZSCORE a score is
// held (the member is there; the engine prunes it when it expires), nil is missing (a set
// never holds "another" value), anything else is unknown.
KeyPresence ClassifyPresenceOf(const std::string& key, const Reply& reply,
                               const std::string& token);

struct PresenceReport {
  int64_t checked_unix_ms = 0;  // wall clock when the round ended (display only)
  // key -> one entry per master (configuration order)
  std::unordered_map<std::string, std::vector<KeyPresence>> keys;
};

using GrantList = std::vector<std::pair<std::string, std::string>>;  // {key, token}

// The grants one round checks: the first grant of each key, at most `max` of them (several read
// holds through this agent share their readers set: its first one stands for them). Sets
// *capped when grants were left out for the cap (duplicates do not count).
GrantList GrantsForRound(const GrantList& grants, size_t max, bool* capped);

class PresenceProbe {
 public:
  static constexpr std::chrono::milliseconds kDemandWindow{15'000};
  static constexpr size_t kMaxGrantsPerRound = 1000;
  static constexpr std::chrono::milliseconds kConnectTimeout{200};
  static constexpr std::chrono::milliseconds kCommandTimeout{500};
  static constexpr std::chrono::milliseconds kRetryPause{1000};  // per failing master

  // `grants` is called on the probe thread, once per round: it must be thread-safe.
  // `demand_window` is for tests; the agent keeps the default.
  PresenceProbe(std::vector<MasterAddress> masters, std::function<GrantList()> grants,
                std::chrono::milliseconds period = std::chrono::milliseconds(1000),
                std::chrono::milliseconds demand_window = kDemandWindow);
  ~PresenceProbe();  // stops
  PresenceProbe(const PresenceProbe&) = delete;
  PresenceProbe& operator=(const PresenceProbe&) = delete;

  void Start();
  // Wakes the thread and joins it; idempotent. A command in flight finishes first (bounded by
  // the timeouts); no further master is asked.
  void Stop();
  // Called by each GET /api/v1/state: keeps probing for the next demand window, then the thread
  // idles. A call while idle starts a round at once; calls while probing only extend the window.
  void Demand();
  // The latest completed round; null until the first one ends.
  std::shared_ptr<const PresenceReport> Latest() const;

  // Rounds completed so far (for tests and metrics).
  uint64_t rounds() const { return rounds_.load(); }
  // True while the thread sleeps waiting for Demand() (no Redis traffic).
  bool idle() const { return idle_.load(); }

 private:
  struct Master;  // one master's connection and retry state; lives on the probe thread

  void Loop();
  // Sleeps until a round is due (next_round, while demanded); false when stopping.
  // Closes the connections before idling.
  bool WaitForRound(std::chrono::steady_clock::time_point& next_round,
                    std::vector<Master>& masters);
  bool stopping() const;
  PresenceReport Round(std::vector<Master>& masters, std::chrono::steady_clock::time_point started);
  // Fills column `m` of `report` for `grants`; on failure leaves it kUnknown.
  void ProbeMaster(Master& master, size_t m, std::chrono::steady_clock::time_point round_started,
                   const GrantList& grants, PresenceReport& report);

  const std::vector<MasterAddress> addresses_;
  const std::function<GrantList()> grants_;
  const std::chrono::milliseconds period_;
  const std::chrono::milliseconds demand_window_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::chrono::steady_clock::time_point demand_until_{};  // probe while now < this
  std::shared_ptr<const PresenceReport> latest_;

  std::atomic<uint64_t> rounds_{0};
  std::atomic<bool> idle_{false};
  bool cap_logged_ = false;  // probe thread only
  std::thread thread_;
};

}  // namespace lw
