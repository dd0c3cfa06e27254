#pragma once
// The fleet's wait-for graph (fleet/wait_graph.h) as the admin API shows it (docs/api.md): the
// deadlocks of a read, and why a lock's holder does not let go (its blocking chain). Pure: no
// I/O, no clock reads; never a token.

#include <nlohmann/json.hpp>

#include "fleet/view.h"

namespace lw {

// view.deadlocks: each with its cycle, process by process (agent, host, pid, command line, what
// it holds that the one before waits for, what it waits for and since when), and the proposed
// revoke (fleet::ProposedVictim) with why.
nlohmann::ordered_json DeadlocksJson(const fleet::FleetView& view);

// The blocking chain of `row`'s holder (fleet::BlockingChain): [] when it waits for nothing the
// reports list.
nlohmann::ordered_json BlockedByJson(const fleet::FleetView& view, const fleet::FleetLock& row);

// Who waits behind `row`'s hold (fleet::WaitingBehind): each waiting process with what it waits
// for and since when, depth first; [] when nobody waits for it.
nlohmann::ordered_json WaitingBehindJson(const fleet::FleetView& view, const fleet::FleetLock& row);

}  // namespace lw
