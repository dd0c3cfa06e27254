#pragma once
// The fleet view: every agent in the registry and every lock key on the masters, joined.
// ViewBuilder is pure: the reader (fleet/reader.h) hands it what the masters said, batch by
// batch, and it keeps counts of every row but only the rows readers ask for (bounded memory
// whatever the locks held). BuildView joins one whole read at once, keeping every row.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/election_record.h"
#include "core/hold.h"
#include "core/lock_kind.h"
#include "fleet/records.h"
#include "fleet/wait_graph.h"
#include "redis/reply.h"

namespace lw::fleet {

// What one master said: its registry entries and every lock key with its value and PTTL. A
// readers set (core/lock_kind.h) gives one copy per reader: key the set's, value the member,
// pttl_ms the reader's own validity (its score minus the master's TIME, at most the set's PTTL;
// readers already expired are left out). Semaphore markers, writer-waiting marks and election
// records are copies too: BuildView reads the kind (and an election's term and leader) from
// them, and makes no row of them.
struct MasterRead {
  std::string master;  // host:port
  bool ok = false;
  std::string error;   // when !ok
  double seconds = 0;  // how long reading it took
  uint64_t keys_walked = 0;
  std::vector<AgentRecord> agents;                // entries that exist on this master
  std::vector<std::pair<std::string, HolderReport>> reports;  // {agent id, report}
  struct Copy {
    std::string key;
    std::string value;
    int64_t pttl_ms = -1;  // -1: no TTL (a leak: the scanner's business)
  };
  std::vector<Copy> copies;
};

struct FleetAgent {
  AgentRecord record;  // the freshest heartbeat any master holds
  int64_t heartbeat_age_ms = 0;
  int masters = 0;  // masters holding its entry
  // Why its settings break the safety argument ("max_ttl_ms 30000, the fleet's 60000"); empty:
  // it agrees with the fleet (the settings most agents announce; ties: the lowest id's).
  std::vector<std::string> drift;
  uint64_t locks_total = 0;  // from its holder report
  uint64_t waiters_total = 0;
};

struct FleetWaiter {
  std::string agent_id;
  std::string agent_name;  // "" when the agent is not in the registry
  WaiterDetail detail;
  int64_t waited_ms = 0;
};

enum class HolderState {
  kLive,     // the holder's agent is in the registry
  kGone,     // the value names an agent that is not in the registry: nothing renews or
             // releases it; it goes when its ttl runs out (or an operator revokes it)
  kUnknown,  // the value is not "<agent id>:<token>" (another writer, or an older agent)
};
std::string_view HolderStateName(HolderState s);  // "live", "gone", "unknown"

// One hold on the masters: a mutex's (the write hold of a read-write lock), a semaphore's permit,
// a read hold, or an election's leader hold.
struct FleetLock {
  std::string resource;  // from the key (core/lock_kind.h ParseLockKey): never a raw key
  std::string key;       // never shown (it holds the separator); revoke names it
  std::string value;     // never shown (it carries the token); revoke compares with it
  std::string hold_id;   // HoldId(value): what the page and a revoke name a hold by
  HoldMode mode = HoldMode::kExclusive;
  int permit = -1;       // kPermit: which permit
  int permits = 0;       // kPermit: K (from the marker, else the holder's report); 0: unknown
  // An election's leader hold: the record beside it that names this hold's value (its term and
  // what the campaign said of itself), from the master with the most recent one; nullopt when
  // no master has such a record (not an election, or its record not written yet).
  std::optional<ElectionRecord> election;
  HolderState state = HolderState::kUnknown;
  std::string agent_id;
  std::string agent_name;
  std::string host;
  std::optional<Hold> detail;  // as its holder's report has it; nullopt: not in the report
  std::vector<int> masters;          // indices of the masters whose key holds `value`
  bool quorum = false;               // masters.size() >= the quorum
  // The quorum-th largest PTTL (the largest when short of a quorum): how long a quorum still
  // holds it. -1: no expiry (a leak).
  int64_t validity_ms = 0;
  int64_t held_ms = -1;     // HeldMsAt the read of the detail; -1: unknown (no detail)
  // "" unless stuck: StuckReason on the holder's detail; without detail, a validity over
  // stuck_after ("expires in 9m, over stuck_after 5m") or no expiry at all.
  std::string stuck_reason;
  // Every agent's waiters for the resource, oldest first (on the row of its copies with the
  // most masters, when copies with different values exist).
  std::vector<FleetWaiter> waiters;
};

// The hold of `row` as one Hold: what its holder reported (nothing but defaults when it did not),
// with what the masters say of it (resource, mode, permit, K, election).
Hold HoldOf(const FleetLock& row);

// Every resource some row holds, as a whole: its kind and who holds it (quorum rows only).
struct FleetResource {
  std::string resource;
  LockKind kind = LockKind::kMutex;
  int permits = 0;         // semaphores: K (0: unknown, no marker on a quorum read)
  int permits_held = 0;    // semaphores: n of K
  int readers = 0;         // read holds
  bool writer = false;     // an exclusive hold
  bool writer_waiting = false;  // a writer-waiting mark on some master: new readers refused
};

// What every row of a read counts for, kept or not (the reporter's fleet totals).
struct FleetCounts {
  uint64_t locks = 0;   // rows held on a quorum
  uint64_t gone = 0;    // of those, whose holder's agent is gone
  uint64_t stuck = 0;   // of those, stuck
  int64_t oldest_stuck_held_ms = 0;  // the longest held of the stuck (0: none, or unknown)
};

struct FleetView {
  int64_t read_unix_ms = 0;  // when the sweep that made it ended (its last read)
  // The sweep (fleet/reader.h): when it started (holds and heartbeats are aged then), in how
  // many reads, how long they took together, and the keys SCAN walked over all masters.
  int64_t read_started_unix_ms = 0;
  int reads = 1;
  double read_seconds = 0;
  uint64_t keys_walked = 0;
  // What a sweep not yet ended found so far: its counts and rows cover only the keys walked.
  bool partial = false;
  int quorum = 0;
  int masters_read = 0;  // masters that answered
  bool complete = false;  // masters_read >= quorum
  std::vector<MasterRead> masters;  // copies and reports cleared: status only
  std::vector<FleetAgent> agents;   // by name, then id
  // The rows kept: for each prefix of kept_for, the first `keep` rows whose resource starts
  // with it (all rows when keep is unbounded); stuck first, then longest held, then by resource.
  std::vector<FleetLock> locks;
  uint64_t locks_total = 0;  // rows of the read, kept or not
  FleetCounts counts;
  std::vector<std::string> kept_for;
  size_t keep = SIZE_MAX;
  std::vector<FleetResource> resources;  // of the rows, by resource
  // Waiters for resources no key holds right now (between holders).
  std::vector<FleetWaiter> waiting_unheld;
  uint64_t keys = 0;  // lock keys seen on any master
  // The wait-for graph's cycles (fleet/wait_graph.h), from every row and every report of the
  // read (not only the rows kept), with what the view says of each actor.
  std::vector<Deadlock> deadlocks;
  // The whole wait-for graph of the read (BlockingChain reads it); null before a read's end.
  std::shared_ptr<const WaitGraph> waits;
};

// Why a lock counts as stuck ("" if it does not): held longer than stuck_after, or not renewing
// with a ttl longer than stuck_after. The one rule, for this agent's locks (admin/views.h) and
// the fleet's.
std::string StuckReason(int64_t held_ms, bool renew, int64_t ttl_ms, int64_t stuck_after_ms);

// Copies of keys outside key_prefix are ignored; rows are one per (key, value): a key whose
// copies hold different values (a leftover of an earlier grant) gets a row per value.
struct ViewInputs {
  std::vector<MasterRead> masters;
  std::string key_prefix;
  int64_t stuck_after_ms = 0;
  int64_t now_unix_ms = 0;
  double read_seconds = 0;
};

FleetView BuildView(ViewInputs in);

struct ViewSettings {
  std::string key_prefix;
  int64_t stuck_after_ms = 0;
  int64_t now_unix_ms = 0;  // what holds and heartbeats are aged at; the view's read_unix_ms
  int masters = 0;
  // The resource prefixes readers ask for ("" for all); for each the first `keep` rows are kept.
  std::vector<std::string> asks = {""};
  size_t keep = SIZE_MAX;
};

// A view built from a read in batches. Its memory is that of the registry (one report per
// agent), the kept rows, and a few bytes per semaphore, read-write lock and election resource
// (its K, its count of holds, its records); not the rows read.
class ViewBuilder {
 public:
  explicit ViewBuilder(ViewSettings settings);
  ~ViewBuilder();
  // Once, first: every master's registry entries and holder reports (copies are ignored).
  void AddRegistry(const std::vector<MasterRead>& masters);
  // The copies of some keys on every master (a master's copies count when ok). Each key is in
  // one batch only: copies of one key in two batches make two rows.
  void AddCopies(const std::vector<MasterRead>& batch);
  // The view, with `masters` as the read's status of each master (their contents cleared).
  FleetView Finish(std::vector<MasterRead> masters, double read_seconds);
  // The view of what was added so far, the builder left as it was (a copy of the kept rows:
  // bounded like the builder).
  FleetView Snapshot(std::vector<MasterRead> masters, double read_seconds) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether Filter(view, prefix, limit) lists every row of the read it should (up to `limit`):
// the read kept rows for that prefix, or kept every row.
bool RowsComplete(const FleetView& view, std::string_view prefix);

// The resource of a row (view.resources), or null.
const FleetResource* ResourceOf(const FleetView& view, std::string_view resource);

// The copies of a readers set `key` whose ZRANGE WITHSCORES reply is `set`, its PTTL `set_pttl`
// (-1: none) and the master's clock `now_ms`, as MasterRead::copies holds them.
std::vector<MasterRead::Copy> ReaderCopies(const std::string& key, const Reply& set,
                                           int64_t set_pttl, int64_t now_ms);

// The rows of `view` whose resource starts with `prefix`, at most `limit` of them (stuck first,
// as in the view).
std::vector<const FleetLock*> Filter(const FleetView& view, std::string_view prefix,
                                     size_t limit);

}  // namespace lw::fleet
