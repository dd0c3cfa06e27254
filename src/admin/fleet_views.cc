#include "admin/fleet_views.h"

#include <algorithm>
#include <charconv>

#include "core/resource_name.h"
#include "admin/wait_views.h"
#include "protocol/hold_json.h"

namespace lw {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json SettingsJson(const fleet::SafetySettings& s) {
  return {{"key_prefix", s.key_prefix},
          {"max_ttl_ms", s.max_ttl_ms},
          {"drift_factor", s.drift_factor},
          {"restart_quarantine", s.restart_quarantine},
          {"fence_prefix", s.fence_prefix},
          {"fence_quorum", s.fence_quorum}};
}

ordered_json AgentJson(const fleet::FleetAgent& a) {
  const fleet::AgentRecord& r = a.record;
  return {{"id", r.id},
          {"name", r.name},
          {"host", r.host},
          {"pid", r.pid},
          {"version", r.version},
          {"admin_url", r.admin_url},
          {"started_at_ms", r.started_unix_ms},
          {"heartbeat_age_ms", a.heartbeat_age_ms},
          {"heartbeat_ttl_ms", r.heartbeat_ttl_ms},
          {"masters", a.masters},
          // Listed agents are those whose entry exists on some master: up until it expires.
          {"up", a.masters > 0},
          {"settings", SettingsJson(r.settings)},
          {"drift", a.drift},
          {"locks_total", a.locks_total},
          {"waiters_total", a.waiters_total}};
}

ordered_json MasterStatusJson(const fleet::MasterRead& m) {
  return {{"master", m.master},
          {"ok", m.ok},
          {"error", m.error},
          {"seconds", m.seconds},
          {"keys_walked", m.keys_walked}};
}

ordered_json WaiterJson(const fleet::FleetWaiter& w) {
  return {{"resource", w.detail.resource},
          {"agent_id", w.agent_id},
          {"agent_name", w.agent_name},
          {"pid", w.detail.pid},
          {"uid", w.detail.uid},
          {"cmdline", w.detail.cmdline},
          {"since_ms", w.detail.since_unix_ms},
          {"waited_ms", w.waited_ms},
          {"mode", std::string(NameOf(w.detail.mode))},
          {"permits", w.detail.permits > 0 ? ordered_json(w.detail.permits) : nullptr}};
}

ordered_json WaitersJson(const std::vector<fleet::FleetWaiter>& waiters) {
  ordered_json out = ordered_json::array();
  for (const fleet::FleetWaiter& w : waiters) out.push_back(WaiterJson(w));
  return out;
}

// The resource as a whole: {"kind", "permits" (K or null), "permits_held" (n of K), "readers",
// "writer", "writer_waiting"}.
ordered_json ShapeJson(const fleet::FleetResource& r) {
  return {{"kind", std::string(NameOf(r.kind))},
          {"permits", r.permits > 0 ? ordered_json(r.permits) : nullptr},
          {"permits_held", r.permits_held},
          {"readers", r.readers},
          {"writer", r.writer},
          {"writer_waiting", r.writer_waiting}};
}

// Moves `name` out of `from`.
ordered_json Take(ordered_json& from, const char* name) {
  ordered_json value = std::move(from[name]);
  from.erase(name);
  return value;
}

// One row of the fleet table: its hold (protocol/hold_json.h) split in two, what the masters
// say of it at the row (resource, mode, permit, K, and the election last) and what its holder's
// agent reported under "holder", after who that agent is (-1 / "" / null where it reported
// nothing); then the masters, the waiters and the resource's shape.
// The row's hold, with this agent's own detail of it when its report has none.
Hold HoldFor(const fleet::FleetLock& l, const LocalHolds& local) {
  if (!l.detail) {
    if (auto it = local.find({l.key, l.value}); it != local.end()) {
      fleet::FleetLock with = l;
      with.detail = it->second;
      return fleet::HoldOf(with);
    }
  }
  return fleet::HoldOf(l);
}

ordered_json LockJson(const fleet::FleetLock& l, const fleet::FleetView& view,
                      const LocalHolds& local) {
  ordered_json hold =
      protocol::HoldJson(HoldFor(l, local), protocol::HoldWire::kFleet, view.read_unix_ms);
  ordered_json masters = ordered_json::array();
  for (int i : l.masters) {
    const bool known = i >= 0 && static_cast<size_t>(i) < view.masters.size();
    masters.push_back(known ? view.masters[static_cast<size_t>(i)].master
                            : "master " + std::to_string(i));
  }
  ordered_json out = {{"resource", Take(hold, "resource")}, {"hold_id", l.hold_id}};
  for (const char* name : {"mode", "permit", "permits"}) out[name] = Take(hold, name);
  const ordered_json election = Take(hold, "election");
  ordered_json holder = {{"state", fleet::HolderStateName(l.state)},
                         {"agent_id", l.agent_id},
                         {"agent_name", l.agent_name},
                         {"host", l.host}};
  holder.update(hold);
  out["holder"] = std::move(holder);
  out["masters"] = std::move(masters);
  out["masters_total"] = view.masters.size();
  out["quorum"] = l.quorum;
  out["validity_ms"] = l.validity_ms;
  out["stuck"] = !l.stuck_reason.empty();
  out["stuck_reason"] = l.stuck_reason;
  out["waiters"] = WaitersJson(l.waiters);
  if (const fleet::FleetResource* r = fleet::ResourceOf(view, l.resource)) {
    out["shape"] = ShapeJson(*r);
  }
  out["election"] = election;
  out["blocked_by"] = BlockedByJson(view, l);
  out["waiting_behind"] = WaitingBehindJson(view, l);
  return out;
}

ordered_json SelfJson(const fleet::AgentRecord& self) {
  return {{"id", self.id}, {"name", self.name}};
}

// The read itself: when, how long, and whether a quorum of masters answered.
ordered_json ReadJson(const fleet::FleetView& view, const fleet::AgentRecord& self) {
  ordered_json masters = ordered_json::array();
  for (const fleet::MasterRead& m : view.masters) masters.push_back(MasterStatusJson(m));
  return {{"self", SelfJson(self)},
          {"read_at_ms", view.read_unix_ms},
          {"read_started_at_ms", view.read_started_unix_ms},
          {"read_seconds", view.read_seconds},
          {"reads", view.reads},
          {"keys_walked", view.keys_walked},
          {"partial", view.partial},
          {"complete", view.complete},
          {"quorum", view.quorum},
          {"masters_read", view.masters_read},
          {"masters", std::move(masters)}};
}

}  // namespace

std::variant<FleetQuery, Failure> ParseFleetQuery(const std::string& prefix,
                                                  const std::string& limit) {
  FleetQuery out;
  if (!prefix.empty()) {
    if (auto problem = ResourceNameProblem(prefix)) return BadRequest("\"prefix\": " + *problem);
    out.prefix = prefix;
  }
  if (limit.empty()) return out;
  const std::string range = "\"limit\" must be a whole number from 1 to " +
                            std::to_string(kMaxFleetRows) + " (default " +
                            std::to_string(kDefaultFleetRows) + ")";
  size_t value = 0;
  const auto [end, ec] = std::from_chars(limit.data(), limit.data() + limit.size(), value);
  if (ec != std::errc() || end != limit.data() + limit.size() || value < 1 ||
      value > kMaxFleetRows) {
    return BadRequest(range);
  }
  out.limit = value;
  return out;
}

std::variant<std::string, Failure> ParseWhoQuery(const std::string& resource) {
  if (resource.empty()) return BadRequest("\"resource\" (the lock's resource name) is required");
  if (auto problem = ResourceNameProblem(resource)) return BadRequest("\"resource\": " + *problem);
  return resource;
}

std::variant<fleet::RevokeRequest, Failure> ParseFleetRevokeBody(const std::string& body) {
  const ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return BadRequest("the body must be a JSON object");
  fleet::RevokeRequest out;
  for (const auto& [name, value] : j.items()) {
    if (name == "resource" && value.is_string()) {
      out.resource = value.get<std::string>();
    } else if (name == "permit" && value.is_number_integer() && value.get<int64_t>() >= 0 &&
               value.get<int64_t>() < kMaxPermits) {
      out.permit = value.get<int>();
    } else if (name == "hold" && value.is_string() &&
               fleet::IsWellFormedHoldId(value.get<std::string>())) {
      out.hold = value.get<std::string>();
    } else if (name == "resource" || name == "permit" || name == "hold") {
      return BadRequest(
          "\"" + name + "\": " +
          (name == "resource" ? std::string("must be a string")
           : name == "permit" ? "must be a whole number from 0 to " + std::to_string(kMaxPermits - 1)
                              : std::string("must be a row's hold_id (16 hex characters)")));
    } else {
      return BadRequest("\"" + name + "\" is not a field of a revoke: the body is {\"resource\", "
                        "and optionally \"permit\" or \"hold\"}");
    }
  }
  if (out.resource.empty()) return BadRequest("\"resource\" (the lock's resource name) is required");
  if (auto problem = ResourceNameProblem(out.resource)) {
    return BadRequest("\"resource\": " + *problem);
  }
  return out;
}

ordered_json FleetJson(const fleet::FleetView& view, const fleet::AgentRecord& self,
                       const FleetQuery& query, const LocalHolds& local) {
  ordered_json out = ReadJson(view, self);
  ordered_json agents = ordered_json::array();
  for (const fleet::FleetAgent& a : view.agents) agents.push_back(AgentJson(a));
  out["agents"] = std::move(agents);
  ordered_json locks = ordered_json::array();
  for (const fleet::FleetLock* l : fleet::Filter(view, query.prefix, query.limit)) {
    locks.push_back(LockJson(*l, view, local));
  }
  out["locks"] = std::move(locks);
  out["locks_total"] = view.locks_total;
  out["rows_complete"] = fleet::RowsComplete(view, query.prefix);
  out["keys"] = view.keys;
  out["prefix"] = query.prefix;
  out["limit"] = query.limit;
  std::vector<fleet::FleetWaiter> unheld;
  for (const fleet::FleetWaiter& w : view.waiting_unheld) {
    if (w.detail.resource.rfind(query.prefix, 0) == 0) unheld.push_back(w);
  }
  out["waiting_unheld"] = WaitersJson(unheld);
  out["deadlocks"] = DeadlocksJson(view);
  return out;
}

ordered_json WhoJson(const fleet::FleetView& view, const fleet::AgentRecord& self,
                     const std::string& resource, const LocalHolds& local) {
  ordered_json out = ReadJson(view, self);
  const auto row = std::find_if(view.locks.begin(), view.locks.end(),
                                [&](const fleet::FleetLock& l) { return l.resource == resource; });
  if (row != view.locks.end()) {
    out["held"] = true;
    out.update(LockJson(*row, view, local));
    // Every hold of the resource (permits, readers), the first one above included.
    ordered_json holds = ordered_json::array();
    for (const fleet::FleetLock& l : view.locks) {
      if (l.resource == resource) holds.push_back(LockJson(l, view, local));
    }
    out["holds"] = std::move(holds);
    return out;
  }
  out["held"] = false;
  out["resource"] = resource;
  std::vector<fleet::FleetWaiter> waiting;
  for (const fleet::FleetWaiter& w : view.waiting_unheld) {
    if (w.detail.resource == resource) waiting.push_back(w);
  }
  out["waiters"] = WaitersJson(waiting);
  return out;
}

ordered_json RevokeJson(const fleet::RevokeResult& r) {
  return {{"how", fleet::HowName(r.how)},
          {"agent_id", r.agent_id},
          {"receivers", r.receivers},
          {"deleted", r.deleted},
          {"masters_read", r.masters_read},
          {"mode", std::string(NameOf(r.mode))},
          {"permit", r.mode == HoldMode::kPermit ? ordered_json(r.permit) : nullptr}};
}

ordered_json WaiterListJson(const Snapshot& s) {
  ordered_json out = ordered_json::array();
  for (const WaiterView& w : s.waiter_list) {
    out.push_back({{"resource", w.resource},
                   {"session", w.session},
                   {"pid", w.peer.pid},
                   {"uid", w.peer.uid},
                   {"cmdline", w.peer.cmdline},
                   {"waited_ms", w.waited_ms},
                   {"wait_ms", w.wait_ms}});
  }
  return out;
}

}  // namespace lw
