#pragma once
// The rules that make rows of the fleet view (fleet/view.h) from what masters said: the
// registry united over masters, copies grouped into rows and attributed to their holders, what
// marks (semaphore markers, writer-waiting marks, election records) add to rows, resources as
// wholes, waiters joined. Pure; shared by BuildView and ViewBuilder (fleet/view.cc).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/election_record.h"
#include "fleet/view.h"

namespace lw::fleet::rows {

// Every agent of the registry (the freshest heartbeat of each) and its latest holder report.
struct Registry {
  std::map<std::string, FleetAgent> agents;
  std::map<std::string, HolderReport> reports;  // of agents in `agents` only
};
Registry ReadRegistry(const std::vector<MasterRead>& masters, int64_t now);

// Every agent's waiters by resource, oldest first.
std::map<std::string, std::vector<FleetWaiter>> WaitersByResource(const Registry& reg,
                                                                  int64_t now);

// What the copies say besides holds: each resource's K (the largest marker seen), its
// writer-waiting marks, and an election's records by the hold value they name (the highest
// term when masters disagree).
struct Marks {
  std::map<std::string, int> permits;
  std::set<std::string> writer_waiting;
  std::map<std::string, std::map<std::string, ElectionRecord>> records;
};

// The rows of the hold copies of `masters` (those ok), attributed and with their stuck reason;
// marks go to `marks` (Resolve adds them to rows later); `keys` grows by the distinct lock keys
// seen.
std::vector<FleetLock> LockRows(const std::vector<MasterRead>& masters,
                                const ViewSettings& settings, const Registry& reg,
                                uint64_t& keys, Marks& marks);
// What the marks say of `row`: a permit's K, an election's record.
void Resolve(FleetLock& row, const std::string& key_prefix, const Marks& marks);

// The view's order: stuck first, then longest held, then by resource.
bool RowBefore(const FleetLock& a, const FleetLock& b);

// Holds on a quorum of one resource, counted over every row of a read.
struct HoldCounts {
  int permits_held = 0;
  int readers = 0;
};
// Each resource of `rows` as a whole, by resource: who holds it on a quorum (the counts of
// `counts` where it has the resource: rows not kept count too).
std::vector<FleetResource> Resources(const std::vector<FleetLock>& rows, const Marks& marks,
                                     const std::map<std::string, HoldCounts>& counts);

// Waiters go to the row of their resource whose copies are on the most masters; those of
// resources no row of the read holds (neither in `rows` nor in `held`) go to `unheld`, oldest
// first.
void JoinWaiters(std::vector<FleetLock>& rows,
                 std::map<std::string, std::vector<FleetWaiter>> waiters,
                 const std::set<std::string>& held, std::vector<FleetWaiter>& unheld);

}  // namespace lw::fleet::rows
