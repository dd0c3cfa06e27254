#pragma once
// FleetReader: builds the FleetView (fleet/view.h) from the masters, on its own thread with its
// own blocking connections, and only while someone wants it: a page or API read (View), the
// CLI, or the reporter (which reads every refresh period to export fleet totals).
//
// A view is made by a sweep: on every master the registry (ZRANGE of the index, then the
// entries of its members, pipelined), and each agent's holder report from the master with its
// freshest entry; then on every master in turn SCAN MATCH "<key_prefix>*" COUNT batch, each
// batch's keys that no earlier master holds (EXISTS) read on every master (GET + PTTL, ZRANGE
// WITHSCORES + PTTL of a readers set, and the master's TIME), pipelined, paced to
// keys_per_second like the leak scanner. A sweep is made in reads of at most `read_budget` keys
// walked each (the masters' cost per refresh), resuming from the SCAN cursor where the last read
// stopped; a small keyspace is one read. The view (fleet/view.h ViewBuilder) counts every row
// and keeps, for each resource prefix asked for in the last kAskFor (and for all), the first
// kKeptRows rows: its memory does not grow with the locks read.
// Reads start at most once per refresh, and no sooner after the previous one than ten times as
// long as it took (the cost bound). A view is published when its sweep ends; until the first
// one has, each read publishes what its sweep found so far, marked partial. A sweep with fewer
// than a quorum of masters answering is marked incomplete. Its cost is counted (FleetStats) and
// in the view; Progress() tells how far the sweep under way is.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/defaults.h"
#include "core/master_address.h"
#include "fleet/fleet_stats.h"
#include "fleet/view.h"

namespace lw::fleet {

struct ReaderSettings {
  std::vector<MasterAddress> masters;
  std::string key_prefix = kDefaultKeyPrefix;
  int64_t stuck_after_ms = kDefaultStuckAfterMs;
  std::chrono::milliseconds refresh{5'000};  // reads start at most this often
  int64_t batch = kDefaultScanBatch;
  int64_t keys_per_second = 200'000;  // per master
  // Keys SCAN walks in one read, over all masters (each call counts at least `batch`).
  int64_t read_budget = kDefaultFleetReadBudget;
  std::chrono::milliseconds connect_timeout{1'000};
  std::chrono::milliseconds command_timeout{2'000};
};

class MasterLinks;
struct Sweep;

// How far the sweep under way is (none: active false).
struct SweepProgress {
  bool active = false;
  int64_t started_unix_ms = 0;
  int reads = 0;              // reads made of it so far
  uint64_t keys_walked = 0;   // by SCAN, over all masters
  size_t master = 0;          // the master whose keys it walks now (index in the settings)
  size_t masters = 0;
};

class FleetReader {
 public:
  // Rows kept per prefix asked for: the API's largest limit.
  static constexpr size_t kKeptRows = 1000;
  // How long a prefix asked for is kept by later reads; at most kMaxAsks prefixes (the least
  // recently asked go first).
  static constexpr std::chrono::seconds kAskFor{60};
  static constexpr size_t kMaxAsks = 16;

  FleetReader(ReaderSettings settings, FleetStats* stats);
  ~FleetReader();  // Stop()
  FleetReader(const FleetReader&) = delete;
  FleetReader& operator=(const FleetReader&) = delete;

  void Start();
  void Stop();

  // Any thread: a view read after `newer_than` (unix ms; 0: any) that kept the rows of
  // `prefix` (RowsComplete), starting a read if the last one is older than the refresh period
  // or did not keep them, waiting up to `wait` for it. When none comes in time (a large
  // keyspace paces reads further apart), the latest older view (its read_unix_ms says how old;
  // RowsComplete whether it has the prefix's rows); null only before the first read ends.
  // Callers never make reads more frequent than the pacing allows.
  std::shared_ptr<const FleetView> View(int64_t newer_than_unix_ms, std::chrono::milliseconds wait,
                                        const std::string& prefix = "");
  // Any thread: the latest view, without asking for a new one (null before the first read).
  std::shared_ptr<const FleetView> Latest() const;
  // Any thread: the sweep under way.
  SweepProgress Progress() const;
  // Keep reading every refresh period while `on` (the reporter does; others read on demand).
  // While on, each complete read also sets FleetStats::totals.
  void KeepFresh(bool on);

 private:
  void Run();
  // One read of the sweep under way (a new one when none is): the view when the sweep ended,
  // or a partial view while no whole one was published yet, else null.
  std::shared_ptr<const FleetView> Read(MasterLinks& links, std::vector<std::string> asks);
  // Under mu_: the prefixes reads keep rows for ("" first), dropping those not asked for lately.
  std::vector<std::string> Asks();

  ReaderSettings settings_;
  FleetStats* stats_;
  mutable std::mutex mu_;
  std::condition_variable wake_, done_;
  std::shared_ptr<const FleetView> latest_;
  std::chrono::steady_clock::time_point latest_at_;  // when latest_ was read
  bool wanted_ = false, keep_fresh_ = false, stopping_ = false;
  int waiting_ = 0;  // View callers waiting for a read
  std::map<std::string, std::chrono::steady_clock::time_point> asks_;  // prefix -> last asked
  SweepProgress progress_;
  std::unique_ptr<Sweep> sweep_;  // the reader thread's: the sweep under way, if any
  // The reader thread's: the deadlocks the last whole read found (wait_graph.h Confirmed).
  std::set<std::vector<Actor>> deadlocks_seen_;
  std::thread thread_;
};

}  // namespace lw::fleet
