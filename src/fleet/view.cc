#include "fleet/view.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <tuple>

#include "core/duration.h"
#include "core/redlock_math.h"
#include "fleet/view_rows.h"

namespace lw::fleet {

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
  ViewSettings settings;
  settings.key_prefix = in.key_prefix;
  settings.stuck_after_ms = in.stuck_after_ms;
  settings.now_unix_ms = in.now_unix_ms;
  settings.masters = static_cast<int>(in.masters.size());
  ViewBuilder builder(std::move(settings));
  builder.AddRegistry(in.masters);
  builder.AddCopies(in.masters);
  return builder.Finish(std::move(in.masters), in.read_seconds);
}

// ---- ViewBuilder

struct ViewBuilder::State {
  ViewSettings settings;
  rows::Registry reg;
  rows::Marks marks;
  uint64_t keys = 0;
  uint64_t rows_read = 0;
  FleetCounts counts;
  std::vector<std::vector<FleetLock>> kept;  // per ask
  std::map<std::string, rows::HoldCounts> hold_counts;  // semaphores' and read-write locks'
  std::set<std::string> waited;  // resources some report has a waiter for
  std::set<std::string> held;    // of those, the ones some row holds
  std::vector<HoldSeen> holding;  // of those, every quorum hold whose holder's pid is known

  // Keeps `ask`'s first `keep` rows (and at most twice that between trims).
  void Trim(std::vector<FleetLock>& rows, size_t keep) {
    if (rows.size() <= keep) return;
    std::nth_element(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep), rows.end(),
                     rows::RowBefore);
    rows.resize(keep);
  }

  void Count(const FleetLock& row) {
    ++rows_read;
    const bool is_waited = waited.contains(row.resource);
    if (is_waited) held.insert(row.resource);
    if (!row.quorum) return;
    if (is_waited && row.held_ms >= 0) {
      if (auto h = HoldSeenOf(row, settings.now_unix_ms - row.held_ms)) {
        holding.push_back(std::move(*h));
      }
    }
    ++counts.locks;
    counts.gone += row.state == HolderState::kGone ? 1 : 0;
    if (row.mode == HoldMode::kPermit) ++hold_counts[row.resource].permits_held;
    if (row.mode == HoldMode::kShared) ++hold_counts[row.resource].readers;
    if (row.stuck_reason.empty()) return;
    ++counts.stuck;
    counts.oldest_stuck_held_ms = std::max(counts.oldest_stuck_held_ms, row.held_ms);
  }
};

ViewBuilder::ViewBuilder(ViewSettings settings) : state_(std::make_unique<State>()) {
  state_->settings = std::move(settings);
  state_->kept.resize(state_->settings.asks.size());
}

ViewBuilder::~ViewBuilder() = default;

void ViewBuilder::AddRegistry(const std::vector<MasterRead>& masters) {
  State& s = *state_;
  s.reg = rows::ReadRegistry(masters, s.settings.now_unix_ms);
  for (const auto& [id, report] : s.reg.reports) {
    for (const WaiterDetail& w : report.waiters) s.waited.insert(w.resource);
  }
}

void ViewBuilder::AddCopies(const std::vector<MasterRead>& batch) {
  State& s = *state_;
  std::vector<FleetLock> rows = rows::LockRows(batch, s.settings, s.reg, s.keys, s.marks);
  const size_t keep = s.settings.keep;
  for (FleetLock& row : rows) {
    s.Count(row);
    for (size_t i = 0; i < s.settings.asks.size(); ++i) {
      if (!row.resource.starts_with(s.settings.asks[i])) continue;
      s.kept[i].push_back(row);
      if (keep != SIZE_MAX && s.kept[i].size() >= 2 * keep) s.Trim(s.kept[i], keep);
    }
  }
}

FleetView ViewBuilder::Finish(std::vector<MasterRead> masters, double read_seconds) {
  State& s = *state_;
  FleetView view;
  view.read_unix_ms = s.settings.now_unix_ms;
  view.read_seconds = read_seconds;
  view.quorum = QuorumSize(s.settings.masters);
  for (const MasterRead& m : masters) view.masters_read += m.ok ? 1 : 0;
  view.complete = view.masters_read >= view.quorum;
  for (const auto& [id, agent] : s.reg.agents) view.agents.push_back(agent);
  std::sort(view.agents.begin(), view.agents.end(), [](const FleetAgent& a, const FleetAgent& b) {
    return std::tie(a.record.name, a.record.id) < std::tie(b.record.name, b.record.id);
  });

  // The union of every ask's first rows, in the view's order, each row once.
  std::set<std::pair<std::string, std::string>> listed;
  for (std::vector<FleetLock>& rows : s.kept) {
    s.Trim(rows, s.settings.keep);
    for (FleetLock& row : rows) {
      if (listed.insert({row.key, row.value}).second) view.locks.push_back(std::move(row));
    }
    rows.clear();
  }
  std::sort(view.locks.begin(), view.locks.end(), rows::RowBefore);
  for (FleetLock& row : view.locks) rows::Resolve(row, s.settings.key_prefix, s.marks);
  view.resources = rows::Resources(view.locks, s.marks, s.hold_counts);
  rows::JoinWaiters(view.locks, rows::WaitersByResource(s.reg, s.settings.now_unix_ms), s.held,
                    view.waiting_unheld);
  std::vector<WaitSeen> waiting;
  for (const auto& [id, report] : s.reg.reports) {
    for (const WaiterDetail& w : report.waiters) {
      waiting.push_back(WaitSeenOf(
          id, w, std::max<int64_t>(0, s.settings.now_unix_ms - w.since_unix_ms), report.unix_ms));
    }
  }
  auto graph = std::make_shared<WaitGraph>(BuildWaitGraph(s.holding, waiting));
  view.deadlocks = graph->deadlocks;
  view.waits = std::move(graph);
  view.keys = s.keys;
  view.locks_total = s.rows_read;
  view.counts = s.counts;
  view.keep = s.settings.keep;
  if (view.keep != SIZE_MAX) view.kept_for = s.settings.asks;

  view.masters = std::move(masters);
  for (MasterRead& m : view.masters) {
    m.agents.clear();
    m.reports.clear();
    m.copies.clear();
  }
  return view;
}

FleetView ViewBuilder::Snapshot(std::vector<MasterRead> masters, double read_seconds) const {
  ViewBuilder copy(state_->settings);
  *copy.state_ = *state_;
  return copy.Finish(std::move(masters), read_seconds);
}

bool RowsComplete(const FleetView& view, std::string_view prefix) {
  return view.locks.size() == view.locks_total ||
         std::find(view.kept_for.begin(), view.kept_for.end(), prefix) != view.kept_for.end();
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
