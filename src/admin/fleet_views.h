#pragma once
// JSON views of the fleet for the admin API (docs/api.md): GET /api/v1/fleet, /api/v1/fleet/who,
// the answer of POST /api/v1/fleet/revoke, and this agent's waiters in /api/v1/state. Pure: no
// I/O, no clock reads.
//
// A lock's value (FleetLock::value) carries its token: no view here ever shows it, nor any part
// of it but the holder agent's id.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "core/result.h"
#include "fleet/records.h"
#include "fleet/revoke.h"
#include "fleet/view.h"
#include "observe/snapshot.h"

namespace lw {

inline constexpr size_t kDefaultFleetRows = 200;
inline constexpr size_t kMaxFleetRows = 1000;

// The query of GET /api/v1/fleet: rows whose resource starts with `prefix` (empty: all), at most
// `limit` of them.
struct FleetQuery {
  std::string prefix;
  size_t limit = kDefaultFleetRows;
};

// Checks the raw query parameters (absent: ""): prefix follows the resource-name rules (empty is
// allowed), limit is an integer 1..kMaxFleetRows (default kDefaultFleetRows). A bad_request
// Failure says what is wrong.
std::variant<FleetQuery, Failure> ParseFleetQuery(const std::string& prefix,
                                                  const std::string& limit);

// The resource of GET /api/v1/fleet/who?resource=R: required, resource-name rules.
std::variant<std::string, Failure> ParseWhoQuery(const std::string& resource);

// The body of POST /api/v1/fleet/revoke: {"resource": R} (its exclusive hold), optionally with
// "permit": i (permit i of a semaphore) and/or "hold": the row's hold_id (any one hold: a
// reader, a permit). Anything else, or a value out of bounds, is a bad_request naming the field.
// The request's resource, permit and hold are filled; the rest is the caller's.
std::variant<fleet::RevokeRequest, Failure> ParseFleetRevokeBody(const std::string& body);

// This agent's own holds as its loop last listed them (Snapshot::locks), by {Redis key, value
// on the masters} (Snapshot::listed_grants): a row of this agent's that its holder report,
// written once per heartbeat, does not list yet takes its holder's detail from here.
using LocalHolds = std::map<std::pair<std::string, std::string>, Hold>;

// Everything the fleet panel shows: this agent (self), the read's status and every master's,
// the agents (settings, drift), the lock rows `query` selects, and the waiters between holders.
nlohmann::ordered_json FleetJson(const fleet::FleetView& view, const fleet::AgentRecord& self,
                                 const FleetQuery& query, const LocalHolds& local = {});

// The row of `resource` ({"held": true, ...the row of FleetJson's "locks"}), or
// {"held": false, "waiters": [...]} with the waiters queued for it anywhere in the fleet.
nlohmann::ordered_json WhoJson(const fleet::FleetView& view, const fleet::AgentRecord& self,
                               const std::string& resource, const LocalHolds& local = {});

// {"how", "agent_id", "receivers", "deleted", "masters_read"}.
nlohmann::ordered_json RevokeJson(const fleet::RevokeResult& result);

// This agent's queued acquires, longest waiting first (Snapshot::waiter_list).
nlohmann::ordered_json WaiterListJson(const Snapshot& snapshot);

}  // namespace lw
