#include "fleet/view_rows.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <tuple>

#include "core/duration.h"
#include "core/key_parts.h"
#include "core/redlock_math.h"

namespace lw::fleet::rows {
namespace {

constexpr int64_t kNoTtl = std::numeric_limits<int64_t>::max();  // PTTL -1, for sorting

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }
std::string Shown(int64_t v) { return std::to_string(v); }
std::string Shown(bool v) { return v ? "true" : "false"; }
std::string Shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

template <typename T>
void Differs(std::vector<std::string>& out, const char* name, const T& mine, const T& fleets) {
  if (mine == fleets) return;
  out.push_back(std::string(name) + " " + mine + ", the fleet's " + fleets);
}

// "max_ttl_ms 30000, the fleet's 60000" for each field where `mine` differs from `fleet`.
std::vector<std::string> Drift(const SafetySettings& mine, const SafetySettings& fleet) {
  std::vector<std::string> out;
  Differs(out, "key_prefix", Quoted(mine.key_prefix), Quoted(fleet.key_prefix));
  Differs(out, "max_ttl_ms", Shown(mine.max_ttl_ms), Shown(fleet.max_ttl_ms));
  Differs(out, "drift_factor", Shown(mine.drift_factor), Shown(fleet.drift_factor));
  Differs(out, "restart_quarantine", Shown(mine.restart_quarantine),
          Shown(fleet.restart_quarantine));
  Differs(out, "fence_prefix", Quoted(mine.fence_prefix), Quoted(fleet.fence_prefix));
  Differs(out, "fence_quorum", Shown(mine.fence_quorum), Shown(fleet.fence_quorum));
  return out;
}

// The settings most agents announce; ties go to the settings of the lowest id.
// `agents` is keyed by id, so the first agent seen with a settings value has its lowest id.
SafetySettings FleetSettings(const std::map<std::string, FleetAgent>& agents) {
  struct Tally {
    SafetySettings settings;
    int count = 0;
    std::string lowest_id;
  };
  std::vector<Tally> tallies;
  for (const auto& [id, agent] : agents) {
    auto it = std::find_if(tallies.begin(), tallies.end(), [&](const Tally& t) {
      return t.settings == agent.record.settings;
    });
    if (it == tallies.end()) tallies.push_back({agent.record.settings, 1, id});
    else ++it->count;
  }
  if (tallies.empty()) return {};
  return std::min_element(tallies.begin(), tallies.end(), [](const Tally& a, const Tally& b) {
           return std::tie(b.count, a.lowest_id) < std::tie(a.count, b.lowest_id);
         })->settings;
}

}  // namespace

Registry ReadRegistry(const std::vector<MasterRead>& masters, int64_t now) {
  Registry reg;
  for (const MasterRead& m : masters) {
    if (!m.ok) continue;
    for (const AgentRecord& r : m.agents) {
      auto [it, fresh] = reg.agents.try_emplace(r.id);
      FleetAgent& a = it->second;
      ++a.masters;
      if (fresh || r.heartbeat_unix_ms > a.record.heartbeat_unix_ms) a.record = r;
    }
  }
  for (const MasterRead& m : masters) {
    if (!m.ok) continue;
    for (const auto& [id, report] : m.reports) {
      if (!reg.agents.contains(id)) continue;
      auto [it, fresh] = reg.reports.try_emplace(id, report);
      if (!fresh && report.unix_ms > it->second.unix_ms) it->second = report;
    }
  }
  const SafetySettings fleet = FleetSettings(reg.agents);
  for (auto& [id, a] : reg.agents) {
    a.heartbeat_age_ms = std::max<int64_t>(0, now - a.record.heartbeat_unix_ms);
    a.drift = Drift(a.record.settings, fleet);
    if (auto it = reg.reports.find(id); it != reg.reports.end()) {
      a.locks_total = it->second.locks_total;
      a.waiters_total = it->second.waiters_total;
    }
  }
  return reg;
}

std::map<std::string, std::vector<FleetWaiter>> WaitersByResource(const Registry& reg,
                                                                  int64_t now) {
  std::map<std::string, std::vector<FleetWaiter>> out;
  for (const auto& [id, report] : reg.reports) {
    const std::string& name = reg.agents.at(id).record.name;
    for (const WaiterDetail& w : report.waiters) {
      out[w.resource].push_back({id, name, w, std::max<int64_t>(0, now - w.since_unix_ms)});
    }
  }
  for (auto& [resource, waiters] : out) {
    std::stable_sort(waiters.begin(), waiters.end(), [](const FleetWaiter& a, const FleetWaiter& b) {
      return a.detail.since_unix_ms < b.detail.since_unix_ms;
    });
  }
  return out;
}

namespace {

// The copies of one key with one value, over the masters.
struct Group {
  KeyPart part;
  std::vector<int> masters;
  std::vector<int64_t> pttls;  // kNoTtl for a key without expiry
};

// Groups the hold copies; markers and writer-waiting marks go to `marks`, keys of a part this
// version does not know are counted and left out.
std::map<std::pair<std::string, std::string>, Group> GroupCopies(
    const std::vector<MasterRead>& masters, const std::string& key_prefix, uint64_t& keys,
    Marks& marks) {
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::set<std::string> seen;
  for (size_t m = 0; m < masters.size(); ++m) {
    if (!masters[m].ok) continue;
    for (const MasterRead::Copy& c : masters[m].copies) {
      if (!c.key.starts_with(key_prefix) || c.pttl_ms < -1) continue;
      seen.insert(c.key);
      const std::optional<KeyPart> part = ParseLockKey(key_prefix, c.key);
      if (!part) continue;
      if (part->part == KeyPart::Part::kWriterWaiting) {
        marks.writer_waiting.insert(part->resource);
        continue;
      }
      if (part->part == KeyPart::Part::kLeader) {  // a description of the hold at P R
        if (std::optional<StoredElectionRecord> r = ParseStoredRecord(c.value)) {
          auto [it, fresh] = marks.records[part->resource].try_emplace(r->value, r->record);
          if (!fresh && r->record.term > it->second.term) it->second = r->record;
        }
        continue;
      }
      // Queue entries are agents waiting and a reservation a lock between two holds: neither
      // is a hold.
      if (part->part == KeyPart::Part::kQueue || part->part == KeyPart::Part::kQueueAlive) continue;
      if (IsPlaceholder(c.value)) continue;  // a reservation, the readers' mark
      if (part->part == KeyPart::Part::kBase) {
        if (const std::optional<LockShape> shape = ShapeOfMarker(c.value)) {
          int& k = marks.permits[part->resource];
          k = std::max(k, shape->permits);
          continue;
        }
      }
      Group& g = groups[{c.key, c.value}];
      g.part = *part;
      if (std::find(g.masters.begin(), g.masters.end(), static_cast<int>(m)) != g.masters.end()) {
        continue;  // SCAN may return a key twice
      }
      g.masters.push_back(static_cast<int>(m));
      g.pttls.push_back(c.pttl_ms == -1 ? kNoTtl : c.pttl_ms);
    }
  }
  keys += seen.size();
  return groups;
}

// How long a quorum still holds the key: the quorum-th largest PTTL (the largest when short).
int64_t Validity(std::vector<int64_t> pttls, int quorum) {
  std::sort(pttls.begin(), pttls.end(), std::greater<>());
  const size_t q = static_cast<size_t>(std::max(quorum, 1));
  const size_t at = pttls.size() >= q ? q - 1 : 0;
  return pttls[at] == kNoTtl ? -1 : pttls[at];
}

// Who holds the row's value, and what the holder's report says of it.
void Attribute(FleetLock& row, const Registry& reg, int64_t now) {
  const std::optional<std::string> id = AgentOfValue(row.value);
  if (!id) {
    row.state = HolderState::kUnknown;
    return;
  }
  row.agent_id = *id;
  auto agent = reg.agents.find(*id);
  if (agent == reg.agents.end()) {
    row.state = HolderState::kGone;
    return;
  }
  row.state = HolderState::kLive;
  row.agent_name = agent->second.record.name;
  row.host = agent->second.record.host;
  auto report = reg.reports.find(*id);
  if (report == reg.reports.end()) return;
  // An agent's several read holds of one resource share the first detail of that mode.
  for (const Hold& d : report->second.locks) {
    if (d.resource == row.resource && d.mode == row.mode &&
        (row.mode != HoldMode::kPermit || d.permit == row.permit)) {
      row.detail = d;
      row.held_ms = HeldMsAt(d, now);
      return;
    }
  }
}

std::string RowStuckReason(const FleetLock& row, int64_t stuck_after_ms) {
  if (row.detail) {
    return StuckReason(row.held_ms, row.detail->renew, row.detail->ttl_ms, stuck_after_ms);
  }
  if (row.validity_ms == -1) return "never expires (no ttl)";
  if (row.validity_ms > stuck_after_ms) {
    return "expires in " + FormatDurationMs(row.validity_ms) + ", over stuck_after " +
           FormatDurationMs(stuck_after_ms);
  }
  return "";
}

}  // namespace

bool RowBefore(const FleetLock& a, const FleetLock& b) {
  const bool a_stuck = !a.stuck_reason.empty(), b_stuck = !b.stuck_reason.empty();
  if (a_stuck != b_stuck) return a_stuck;
  if (a.held_ms != b.held_ms) return a.held_ms > b.held_ms;
  if (a.resource != b.resource) return a.resource < b.resource;
  if (a.permit != b.permit) return a.permit < b.permit;
  return a.masters.size() > b.masters.size();
}

std::vector<FleetLock> LockRows(const std::vector<MasterRead>& masters,
                                const ViewSettings& settings, const Registry& reg,
                                uint64_t& keys, Marks& marks) {
  const int quorum = QuorumSize(settings.masters);
  std::vector<FleetLock> rows;
  for (auto& [key_value, group] : GroupCopies(masters, settings.key_prefix, keys, marks)) {
    FleetLock row;
    row.key = key_value.first;
    row.value = key_value.second;
    row.hold_id = HoldId(row.value);
    row.resource = group.part.resource;
    row.mode = RowOf(group.part.part).mode;
    row.permit = group.part.permit;
    row.masters = group.masters;
    std::sort(row.masters.begin(), row.masters.end());
    row.quorum = static_cast<int>(row.masters.size()) >= quorum;
    row.validity_ms = Validity(group.pttls, quorum);
    Attribute(row, reg, settings.now_unix_ms);
    row.stuck_reason = RowStuckReason(row, settings.stuck_after_ms);
    rows.push_back(std::move(row));
  }
  return rows;
}

void Resolve(FleetLock& row, const std::string& key_prefix, const Marks& marks) {
  if (row.mode == HoldMode::kPermit) {
    auto k = marks.permits.find(row.resource);
    row.permits = k != marks.permits.end() ? k->second : row.detail ? row.detail->permits : 0;
  }
  auto e = marks.records.find(row.resource);
  if (e == marks.records.end()) return;
  const std::optional<KeyPart> part = ParseLockKey(key_prefix, row.key);
  if (!part || part->part != KeyPart::Part::kBase) return;
  if (auto r = e->second.find(row.value); r != e->second.end()) row.election = r->second;
}

std::vector<FleetResource> Resources(const std::vector<FleetLock>& rows, const Marks& marks,
                                     const std::map<std::string, HoldCounts>& counts) {
  std::map<std::string, FleetResource> out;
  for (const FleetLock& row : rows) {
    FleetResource& r = out[row.resource];
    r.resource = row.resource;
    if (row.mode == HoldMode::kPermit) {
      r.kind = LockKind::kSemaphore;
      r.permits = std::max(r.permits, row.permits);
    }
    if (marks.records.contains(row.resource)) r.kind = LockKind::kElection;
    r.writer_waiting = marks.writer_waiting.contains(row.resource);
    if (!row.quorum) continue;
    r.permits_held += row.mode == HoldMode::kPermit ? 1 : 0;
    r.readers += row.mode == HoldMode::kShared ? 1 : 0;
    r.writer = r.writer || row.mode == HoldMode::kExclusive;
  }
  std::vector<FleetResource> list;
  for (auto& [name, r] : out) {
    if (auto c = counts.find(name); c != counts.end()) {
      r.permits_held = c->second.permits_held;
      r.readers = c->second.readers;
    }
    list.push_back(std::move(r));
  }
  return list;
}

void JoinWaiters(std::vector<FleetLock>& rows,
                 std::map<std::string, std::vector<FleetWaiter>> waiters,
                 const std::set<std::string>& held, std::vector<FleetWaiter>& unheld) {
  std::map<std::string, FleetLock*> first;
  for (FleetLock& row : rows) {
    auto it = first.find(row.resource);
    if (it == first.end() || row.masters.size() > it->second->masters.size()) {
      first[row.resource] = &row;
    }
  }
  for (auto& [resource, list] : waiters) {
    auto it = first.find(resource);
    if (it != first.end()) {
      it->second->waiters = std::move(list);
    } else if (!held.contains(resource)) {
      unheld.insert(unheld.end(), list.begin(), list.end());
    }
  }
  std::stable_sort(unheld.begin(), unheld.end(), [](const FleetWaiter& a, const FleetWaiter& b) {
    return a.detail.since_unix_ms < b.detail.since_unix_ms;
  });
}


}  // namespace lw::fleet::rows
