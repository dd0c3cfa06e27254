#include "fleet/view.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "core/duration.h"
#include "core/key_parts.h"
#include "core/redlock_math.h"

namespace lw::fleet {
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

// Every agent of the registry (the freshest heartbeat of each) and its latest holder report.
struct Registry {
  std::map<std::string, FleetAgent> agents;
  std::map<std::string, HolderReport> reports;  // of agents in `agents` only
};

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

// Every agent's waiters by resource, oldest first.
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

// The copies of one key with one value, over the masters.
struct Group {
  KeyPart part;
  std::vector<int> masters;
  std::vector<int64_t> pttls;  // kNoTtl for a key without expiry
};

// What the copies say besides holds: each resource's K (the largest marker seen), its
// writer-waiting marks, and an election's records by the hold value they name (the highest
// term when masters disagree).
struct Marks {
  std::map<std::string, int> permits;
  std::set<std::string> writer_waiting;
  std::map<std::string, std::map<std::string, ElectionRecord>> records;
};

// Groups the hold copies; markers and writer-waiting marks go to `marks`, keys of a part this
// version does not know are counted and left out.
std::map<std::pair<std::string, std::string>, Group> GroupCopies(const ViewInputs& in,
                                                                 uint64_t& keys, Marks& marks) {
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::set<std::string> seen;
  for (size_t m = 0; m < in.masters.size(); ++m) {
    if (!in.masters[m].ok) continue;
    for (const MasterRead::Copy& c : in.masters[m].copies) {
      if (!c.key.starts_with(in.key_prefix) || c.pttl_ms < -1) continue;
      seen.insert(c.key);
      const std::optional<KeyPart> part = ParseLockKey(in.key_prefix, c.key);
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
      if (IsReservation(c.value)) continue;
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
  keys = seen.size();
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

bool RowBefore(const FleetLock& a, const FleetLock& b) {
  const bool a_stuck = !a.stuck_reason.empty(), b_stuck = !b.stuck_reason.empty();
  if (a_stuck != b_stuck) return a_stuck;
  if (a.held_ms != b.held_ms) return a.held_ms > b.held_ms;
  if (a.resource != b.resource) return a.resource < b.resource;
  if (a.permit != b.permit) return a.permit < b.permit;
  return a.masters.size() > b.masters.size();
}

std::vector<FleetLock> LockRows(const ViewInputs& in, const Registry& reg, int quorum,
                                uint64_t& keys, Marks& marks) {
  std::vector<FleetLock> rows;
  for (auto& [key_value, group] : GroupCopies(in, keys, marks)) {
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
    Attribute(row, reg, in.now_unix_ms);
    if (row.mode == HoldMode::kPermit) {
      auto k = marks.permits.find(row.resource);
      row.permits = k != marks.permits.end() ? k->second : row.detail ? row.detail->permits : 0;
    }
    if (auto e = marks.records.find(row.resource);
        e != marks.records.end() && group.part.part == KeyPart::Part::kBase) {
      if (auto r = e->second.find(row.value); r != e->second.end()) row.election = r->second;
    }
    row.stuck_reason = RowStuckReason(row, in.stuck_after_ms);
    rows.push_back(std::move(row));
  }
  return rows;
}

// Each resource of `rows` as a whole, by resource: who holds it on a quorum.
std::vector<FleetResource> Resources(const std::vector<FleetLock>& rows, const Marks& marks) {
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
  for (auto& [name, r] : out) list.push_back(std::move(r));
  return list;
}

// Waiters go to the row of their resource whose copies are on the most masters; those of resources no key holds go to `unheld`, oldest first.
void JoinWaiters(std::vector<FleetLock>& rows,
                 std::map<std::string, std::vector<FleetWaiter>> waiters,
                 std::vector<FleetWaiter>& unheld) {
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
    } else {
      unheld.insert(unheld.end(), list.begin(), list.end());
    }
  }
  std::stable_sort(unheld.begin(), unheld.end(), [](const FleetWaiter& a, const FleetWaiter& b) {
    return a.detail.since_unix_ms < b.detail.since_unix_ms;
  });
}

}  // namespace

std::string_view HolderStateName(HolderState s) {
  switch (s) {
    case HolderState::kLive:
      return "live";
    case HolderState::kGone:
      return "gone";
    case HolderState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string StuckReason(int64_t held_ms, bool renew, int64_t ttl_ms, int64_t stuck_after_ms) {
  if (held_ms > stuck_after_ms) {
    return "held " + FormatDurationMs(held_ms) + ", over stuck_after " +
           FormatDurationMs(stuck_after_ms);
  }
  if (!renew && ttl_ms > stuck_after_ms) {
    return "not renewing, ttl " + FormatDurationMs(ttl_ms) + ": a hung holder keeps it " +
           "that long";
  }
  return "";
}

FleetView BuildView(ViewInputs in) {
  FleetView view;
  view.read_unix_ms = in.now_unix_ms;
  view.read_seconds = in.read_seconds;
  view.quorum = QuorumSize(static_cast<int>(in.masters.size()));
  for (const MasterRead& m : in.masters) view.masters_read += m.ok ? 1 : 0;
  view.complete = view.masters_read >= view.quorum;

  const Registry reg = ReadRegistry(in.masters, in.now_unix_ms);
  for (const auto& [id, agent] : reg.agents) view.agents.push_back(agent);
  std::sort(view.agents.begin(), view.agents.end(), [](const FleetAgent& a, const FleetAgent& b) {
    return std::tie(a.record.name, a.record.id) < std::tie(b.record.name, b.record.id);
  });

  Marks marks;
  view.locks = LockRows(in, reg, view.quorum, view.keys, marks);
  std::sort(view.locks.begin(), view.locks.end(), RowBefore);
  view.resources = Resources(view.locks, marks);
  JoinWaiters(view.locks, WaitersByResource(reg, in.now_unix_ms), view.waiting_unheld);

  view.masters = std::move(in.masters);
  for (MasterRead& m : view.masters) {
    m.agents.clear();
    m.reports.clear();
    m.copies.clear();
  }
  return view;
}

Hold HoldOf(const FleetLock& row) {
  Hold h = row.detail.value_or(Hold{});
  h.resource = row.resource;
  h.mode = row.mode;
  h.permit = row.permit;
  h.permits = row.permits;
  h.election = row.election;
  return h;
}

const FleetResource* ResourceOf(const FleetView& view, std::string_view resource) {
  auto it = std::lower_bound(
      view.resources.begin(), view.resources.end(), resource,
      [](const FleetResource& r, std::string_view name) { return r.resource < name; });
  return it != view.resources.end() && it->resource == resource ? &*it : nullptr;
}

std::vector<MasterRead::Copy> ReaderCopies(const std::string& key, const Reply& set,
                                           int64_t set_pttl, int64_t now_ms) {
  std::vector<MasterRead::Copy> out;
  if (set.kind != Reply::Kind::kArray) return out;
  for (size_t i = 0; i + 1 < set.elements.size(); i += 2) {
    double expiry = 0;
    const std::string& score = set.elements[i + 1].text;
    const auto [end, ec] = std::from_chars(score.data(), score.data() + score.size(), expiry);
    if (ec != std::errc() || end != score.data() + score.size()) continue;
    if (!(expiry > static_cast<double>(now_ms) && expiry < 9e18)) continue;  // expired
    int64_t left = static_cast<int64_t>(expiry) - now_ms;
    if (set_pttl >= 0) left = std::min(left, set_pttl);
    out.push_back({key, set.elements[i].text, left});
  }
  return out;
}

std::vector<const FleetLock*> Filter(const FleetView& view, std::string_view prefix,
                                     size_t limit) {
  std::vector<const FleetLock*> out;
  for (const FleetLock& row : view.locks) {
    if (out.size() >= limit) break;
    if (row.resource.starts_with(prefix)) out.push_back(&row);
  }
  return out;
}

}  // namespace lw::fleet
