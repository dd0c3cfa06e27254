#include "admin/wait_views.h"

#include <string>

#include "core/duration.h"

namespace lw {
namespace {

using ordered_json = nlohmann::ordered_json;

const fleet::FleetAgent* FindAgent(const fleet::FleetView& view, const std::string& id) {
  for (const fleet::FleetAgent& a : view.agents) {
    if (a.record.id == id) return &a;
  }
  return nullptr;
}

// {"agent_id", "agent_name", "host", "gone"}: gone when the agent is not in the registry.
ordered_json AgentWhere(const fleet::FleetView& view, const std::string& agent_id) {
  const fleet::FleetAgent* a = FindAgent(view, agent_id);
  return {{"agent_id", agent_id},
          {"agent_name", a != nullptr ? a->record.name : ""},
          {"host", a != nullptr ? a->record.host : ""},
          {"gone", a == nullptr}};
}

ordered_json HoldSeenJson(const fleet::FleetView& view, const fleet::HoldSeen& h) {
  ordered_json out = AgentWhere(view, h.holder.agent_id);
  out["pid"] = fleet::ProcessOf(h);
  out["actor_pid"] = h.holder.pid;
  out["resource"] = h.resource;
  out["hold_id"] = h.hold_id;
  out["cmdline"] = h.cmdline;
  out["held_ms"] = h.since_unix_ms > 0 && view.read_unix_ms >= h.since_unix_ms
                       ? ordered_json(view.read_unix_ms - h.since_unix_ms)
                       : nullptr;
  return out;
}

// The waiting side of an edge: where, which process (and its actor), what for, how long.
ordered_json WaitJson(const fleet::FleetView& view, const fleet::WaitEdge& e) {
  ordered_json out = AgentWhere(view, e.waiter.agent_id);
  out["pid"] = e.pid >= 0 ? e.pid : e.waiter.pid;
  out["actor_pid"] = e.waiter.pid;
  out["cmdline"] = e.cmdline;
  out["waits_for"] = e.resource;
  out["waited_ms"] = e.waited_ms;
  return out;
}

}  // namespace

ordered_json DeadlocksJson(const fleet::FleetView& view) {
  ordered_json out = ordered_json::array();
  for (const fleet::Deadlock& d : view.deadlocks) {
    ordered_json cycle = ordered_json::array();
    for (size_t i = 0; i < d.cycle.size(); ++i) {
      ordered_json entry = WaitJson(view, d.edges[i]);
      const fleet::HoldSeen* held = fleet::HoldOfCycle(d, i);
      entry["holds"] = held != nullptr ? HoldSeenJson(view, *held) : ordered_json(nullptr);
      const fleet::Actor& next = d.cycle[(i + 1) % d.cycle.size()];
      entry["held_by"] = {{"agent_id", next.agent_id}, {"actor_pid", next.pid}};
      cycle.push_back(std::move(entry));
    }
    const size_t victim = fleet::ProposedVictim(d);
    const fleet::HoldSeen* held = fleet::HoldOfCycle(d, victim);
    ordered_json proposal = nullptr;
    if (held != nullptr) {
      proposal = {{"index", victim},
                  {"resource", held->resource},
                  {"hold_id", held->hold_id},
                  {"agent_id", held->holder.agent_id},
                  {"pid", fleet::ProcessOf(*held)},
                  {"why", "its holder has waited least in the cycle (" +
                              FormatDurationMs(d.edges[victim].waited_ms) +
                              "): its wait began last and closed the cycle, so revoking the "
                              "lock it holds ends the deadlock and costs the least waiting"}};
    }
    out.push_back({{"actors", d.actors.size()},
                   {"oldest_wait_ms", d.oldest_wait_ms},
                   {"cycle", std::move(cycle)},
                   {"proposal", std::move(proposal)}});
  }
  return out;
}

ordered_json WaitingBehindJson(const fleet::FleetView& view, const fleet::FleetLock& row) {
  ordered_json out = ordered_json::array();
  const auto seen = fleet::HoldSeenOf(row, 0);
  if (!seen || !view.waits) return out;
  for (const fleet::ChainStep& step :
       fleet::WaitingBehind(*view.waits, seen->holder, row.resource)) {
    ordered_json j = WaitJson(view, *step.edge);
    j["depth"] = step.depth;
    j["cycle"] = step.cycle;
    out.push_back(std::move(j));
  }
  return out;
}

ordered_json BlockedByJson(const fleet::FleetView& view, const fleet::FleetLock& row) {
  ordered_json out = ordered_json::array();
  const auto seen = fleet::HoldSeenOf(row, 0);
  if (!seen || !view.waits) return out;
  for (const fleet::ChainStep& step : fleet::BlockingChain(*view.waits, seen->holder)) {
    ordered_json j = WaitJson(view, *step.edge);
    j["depth"] = step.depth;
    ordered_json holders = ordered_json::array();
    for (const fleet::HoldSeen& h : step.edge->holds) holders.push_back(HoldSeenJson(view, h));
    j["held_by"] = std::move(holders);
    j["cycle"] = step.cycle;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace lw
