#pragma once
// LeakScanner: finds lock keys (and, with extra patterns, any keys) that will never expire or
// that sit on too few masters. Runs on its own thread with its own blocking connections, so a
// slow SCAN never delays a lock grant; paced to a keys/second budget so a master holding
// millions of keys is not hurt.
//
// A pass: for every master, SCAN each pattern with COUNT batch, and per batch pipeline PTTL for
// every key and, for lock keys, what holds them: GET of a string key, ZRANGE WITHSCORES of a
// readers set (each member a read hold; core/lock_kind.h has the key shapes). Every lock key
// without a TTL, or with one above max_ttl_ms, is a finding, whatever its shape (a mutex's
// key, a semaphore's marker or permit, a readers set, a writer-waiting mark). Then holds seen
// on fewer than a quorum of masters are read again on every master at once, and those still
// short of a quorum and not held through this agent are reported as partial leftovers;
// semaphore markers and writer-waiting marks are not holds and never partial.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/master_address.h"
#include "core/defaults.h"
#include "scan/findings.h"
#include "scan/scan_stats.h"

namespace lw {

struct ScanSettings {
  std::vector<MasterAddress> masters;
  std::string key_prefix = kDefaultKeyPrefix;
  // Fence counters have no TTL by design: never reported, whatever pattern finds them.
  std::string fence_prefix = kDefaultFencePrefix;
  std::vector<std::string> extra_patterns;  // scanned after "<key_prefix>*"
  int64_t max_ttl_ms = kDefaultMaxTtlMs;
  int64_t batch = kDefaultScanBatch;
  // keys walked by SCAN (at least COUNT per call) per second
  int64_t keys_per_second = kDefaultScanKeysPerSecond;
  std::chrono::milliseconds connect_timeout{kDefaultConnectTimeoutMs};
  std::chrono::milliseconds command_timeout{2000};
};

struct MasterPass {
  std::string master;  // host:port
  bool ok = false;
  std::string error;
  uint64_t keys_scanned = 0;
  double seconds = 0;
  int64_t finished_unix_ms = 0;
  uint64_t lock_keys = 0;  // keys under key_prefix that still existed when inspected
};

struct ScanReport {
  std::vector<Finding> findings;
  std::vector<MasterPass> masters;
  bool partial_checked = false;
  std::string partial_note;  // why the partial check was skipped, if it was
  int64_t started_unix_ms = 0;
  int64_t finished_unix_ms = 0;

  // Findings of one master by kind.
  FindingCounts CountsFor(size_t master) const;
};

struct ScanHooks {
  // Which of the candidate grants are held through this agent, as of after the call; nullopt
  // when that cannot be told in time (the partial check is then skipped rather than run
  // against grants that may be stale). Asked about the grants of at most 1,000 keys.
  using LiveFn = std::function<std::optional<LiveGrants>(const Grants& candidates)>;
  LiveFn live;
  std::function<bool()> stopping;                      // polled between batches
  std::function<void(std::chrono::microseconds)> pause;  // pacing sleep (may return early)
  ScanStats* stats = nullptr;  // null: not counted
};

// One pass over every master (blocking). Masters that fail are reported in `masters`.
ScanReport RunScanPass(const ScanSettings& settings, const ScanHooks& hooks);

class LeakScanner {
 public:
  LeakScanner(ScanSettings settings, std::chrono::milliseconds interval,
              ScanHooks::LiveFn live, ScanStats* stats);
  ~LeakScanner();
  LeakScanner(const LeakScanner&) = delete;
  LeakScanner& operator=(const LeakScanner&) = delete;

  void Start();  // first pass at once, then one every interval
  void Stop();   // interrupts pacing and waits for the thread (a command in flight finishes)
  void Rescan(); // start the next pass now (no-op while one runs)
  // Drops one finding from the latest report (it was just remedied).
  void Forget(size_t master, const std::string& key);
  // The latest completed report; null before the first pass ends.
  std::shared_ptr<const ScanReport> Latest() const;
  std::chrono::milliseconds interval() const { return interval_; }

 private:
  void Loop();

  ScanSettings settings_;
  std::chrono::milliseconds interval_;
  ScanHooks::LiveFn live_;
  ScanStats* stats_;  // null: not counted
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool rescan_ = false;
  std::shared_ptr<const ScanReport> latest_;
  std::vector<std::string> last_errors_;  // each master's last pass's ("" ok); Loop's thread only
  std::thread thread_;
};

}  // namespace lw
