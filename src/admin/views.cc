#include "admin/views.h"

#include <algorithm>
#include <array>
#include <ctime>

#include "admin/fleet_views.h"
#include "observe/loop_monitor.h"
#include "core/duration.h"
#include "fleet/view.h"
#include "protocol/hold_json.h"

namespace lw {

std::string IsoTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "";
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  char millis[8];
  std::snprintf(millis, sizeof millis, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return std::string(text) + millis;
}

const char* const kHowToEnableActions =
    "Actions (force-release, expire or delete a leaked key) need an admin token. Write 16 or "
    "more random characters to a file only the agent's user can read (for example: "
    "head -c 32 /dev/urandom | base64 > /etc/lockwarden/admin.token && chmod 600 "
    "/etc/lockwarden/admin.token), start the agent with admin_token_file = "
    "\"/etc/lockwarden/admin.token\" (or --admin-token-file), and paste the token here.";

std::string StuckReason(const LockView& lock, int64_t stuck_after_ms) {
  return fleet::StuckReason(lock.held_ms, lock.renew, lock.ttl_ms, stuck_after_ms);
}

namespace {

template <typename T>
nlohmann::ordered_json OrNull(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json MastersView(const StateInputs& in) {
  const Snapshot& s = *in.snapshot;
  nlohmann::ordered_json masters = nlohmann::ordered_json::array();
  for (size_t i = 0; i < s.masters.size(); ++i) {
    const NodeStatus& n = s.masters[i];
    nlohmann::ordered_json lock_keys = nullptr, leaked_keys = nullptr;
    if (in.leaks != nullptr && i < in.leaks->masters.size() && in.leaks->masters[i].ok) {
      lock_keys = in.leaks->masters[i].lock_keys;
      const FindingCounts c = in.leaks->CountsFor(i);
      leaked_keys = c.no_ttl + c.ttl_above_max + c.partial;
    }
    masters.push_back({{"index", i},
                       {"master", n.addr},
                       {"tls", n.tls},
                       {"up", n.up},
                       {"rtt_ms", n.rtt_ms},
                       {"rtt_p50_ms", OrNull(n.rtt_p50_ms)},
                       {"rtt_p99_ms", OrNull(n.rtt_p99_ms)},
                       {"errors", n.errors},
                       {"reconnects", n.reconnects},
                       {"last_error", n.last_error},
                       {"uptime_s", OrNull(n.uptime_s)},
                       {"run_id", n.run_id},
                       {"quarantined", n.quarantined},
                       {"quarantine_left_ms", OrNull(n.quarantine_left_ms)},
                       {"quarantine_reason", n.quarantine_reason},
                       {"lock_keys", lock_keys},
                       {"leaked_keys", leaked_keys}});
  }
  return masters;
}

// The campaigns queued behind an election's leader at this agent (as far as the snapshot's
// waiter list goes), longest waiting first.
nlohmann::ordered_json CandidatesJson(const LockView& l, const Snapshot& s) {
  nlohmann::ordered_json candidates = nlohmann::ordered_json::array();
  for (const WaiterView& w : s.waiter_list) {
    if (w.resource != l.resource) continue;
    candidates.push_back({{"session", w.session},
                          {"pid", w.peer.pid},
                          {"uid", w.peer.uid},
                          {"cmdline", w.peer.cmdline},
                          {"waited_ms", w.waited_ms}});
  }
  return candidates;
}

nlohmann::ordered_json LocksView(const StateInputs& in) {
  const Snapshot& s = *in.snapshot;
  struct Row {
    const LockView* lock;
    std::string stuck;
  };
  std::vector<Row> rows;
  for (const LockView& l : s.locks) rows.push_back({&l, StuckReason(l, in.stuck_after_ms)});
  // Stuck first, then the longest held (as the snapshot lists them: ResourceTable::ListedLocks).
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return !a.stuck.empty() && b.stuck.empty();
  });
  const std::string checked_at = in.presence ? IsoTime(in.presence->checked_unix_ms) : "";
  nlohmann::ordered_json locks = nlohmann::ordered_json::array();
  for (const Row& row : rows) {
    const LockView& l = *row.lock;
    const std::vector<KeyPresence>* seen = nullptr;
    if (in.presence != nullptr) {
      auto it = in.presence->keys.find(l.key);
      if (it != in.presence->keys.end()) seen = &it->second;
    }
    // One state per master, in the order of "masters" (names would triple the size).
    nlohmann::ordered_json presence = nlohmann::ordered_json::array();
    for (size_t i = 0; i < s.masters.size(); ++i) {
      presence.push_back(
          PresenceName(seen != nullptr && i < seen->size() ? (*seen)[i] : KeyPresence::kUnknown));
    }
    // The hold (protocol/hold_json.h), an election's with its candidates, then how it stands.
    nlohmann::ordered_json lock = protocol::HoldJson(l, protocol::HoldWire::kAdmin);
    if (lock["election"].is_object()) lock["election"]["candidates"] = CandidatesJson(l, s);
    lock["stuck"] = !row.stuck.empty();
    lock["stuck_reason"] = row.stuck;
    lock["presence"] = std::move(presence);
    lock["presence_checked_at"] = seen != nullptr ? checked_at : "";
    locks.push_back(std::move(lock));
  }
  return locks;
}

nlohmann::ordered_json EventsView(const std::vector<Event>& events) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Event& e : events) {
    out.push_back({{"at", IsoTime(e.at_unix_ms)},
                   {"at_unix_ms", e.at_unix_ms},
                   {"kind", e.kind},
                   {"severity", SeverityName(e.severity)},
                   {"message", e.message},
                   {"count", e.count}});
  }
  return out;
}

constexpr std::array<const char*, static_cast<size_t>(AcquireOutcome::kCount)> kOutcomeNames = {
    "acquired", "timeout", "no_quorum", "error"};

nlohmann::ordered_json HistoryView(const std::vector<HistoryPoint>& history) {
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const HistoryPoint& p : history) {
    nlohmann::ordered_json point = {{"t", p.t_unix_ms}};
    for (size_t i = 0; i < kOutcomeNames.size(); ++i) point[kOutcomeNames[i]] = p.outcomes[i];
    point["wait_p99_ms"] = OrNull(p.wait_p99_ms);
    points.push_back(std::move(point));
  }
  return {{"bucket_ms", AcquireHistory::kBucketMs},
          {"outcomes", kOutcomeNames},
          {"points", std::move(points)}};
}

}  // namespace

nlohmann::ordered_json StateView(const StateInputs& in) {
  const Snapshot& s = *in.snapshot;
  const QuorumCounts quorum = QuorumOf(s);
  const int64_t uptime_ms =
      in.agent.started_unix_ms > 0 ? s.taken_unix_ms - in.agent.started_unix_ms : 0;
  nlohmann::ordered_json actions = {{"enabled", in.actions_enabled}};
  actions["how_to_enable"] = in.actions_enabled ? "" : kHowToEnableActions;
  actions["max_ttl_ms"] = in.max_ttl_ms;
  return {{"taken_at", IsoTime(s.taken_unix_ms)},
          {"taken_unix_ms", s.taken_unix_ms},
          {"agent",
           {{"version", in.agent.version},
            {"pid", in.agent.pid},
            {"started_at", IsoTime(in.agent.started_unix_ms)},
            {"uptime_s", std::max<int64_t>(0, uptime_ms / 1000)},
            {"socket", in.agent.socket},
            {"id", in.agent_id},
            {"name", in.agent_name}}},
          {"actions", std::move(actions)},
          {"quorum",
           {{"masters", s.masters.size()},
            {"up", s.masters_up},
            {"usable", s.masters_usable},
            {"needed", s.quorum},
            {"margin", QuorumMargin(quorum)},
            {"state", QuorumStateName(QuorumStateOf(quorum))}}},
          {"masters", MastersView(in)},
          {"sessions", s.sessions},
          {"waiters", s.waiters},
          {"waiter_list", WaiterListJson(s)},
          {"oldest_wait_ms", s.oldest_wait_ms},
          {"loop",
           {{"lag_max_ms", s.loop_lag_max_ms},
            {"turn_max_ms", s.loop_turn_max_ms},
            {"window_s", LoopMonitor::kMaximaWindow.count()}}},
          {"stuck_after_ms", in.stuck_after_ms},
          {"locks_total", s.locks_held},
          {"locks", LocksView(in)},
          {"leaks", LeaksView(in.leaks, in.scan_interval_ms)},
          {"events", EventsView(in.events)},
          {"history", HistoryView(in.history)}};
}

nlohmann::ordered_json StateView(const Snapshot& snapshot) {
  StateInputs in;
  in.snapshot = &snapshot;
  return StateView(in);
}

nlohmann::ordered_json LeaksView(const ScanReport* report, int64_t interval_ms) {
  nlohmann::ordered_json out;
  out["scanner"] = interval_ms > 0 ? "on" : "off";
  out["interval_ms"] = interval_ms;
  if (report == nullptr) {
    out["last_pass"] = nullptr;
    out["leaks"] = nlohmann::ordered_json::array();
    return out;
  }
  nlohmann::ordered_json masters = nlohmann::ordered_json::array();
  for (const MasterPass& m : report->masters) {
    masters.push_back({{"master", m.master},
                       {"ok", m.ok},
                       {"error", m.error},
                       {"keys_scanned", m.keys_scanned},
                       {"lock_keys", m.lock_keys},
                       {"seconds", m.seconds},
                       {"finished_at", IsoTime(m.finished_unix_ms)}});
  }
  out["last_pass"] = {{"started_at", IsoTime(report->started_unix_ms)},
                      {"started_unix_ms", report->started_unix_ms},
                      {"finished_at", IsoTime(report->finished_unix_ms)},
                      {"finished_unix_ms", report->finished_unix_ms},
                      {"partial_checked", report->partial_checked},
                      {"partial_note", report->partial_note},
                      {"masters", masters}};
  nlohmann::ordered_json leaks = nlohmann::ordered_json::array();
  for (const Finding& f : report->findings) {
    nlohmann::ordered_json leak = {
        {"master", f.master < report->masters.size() ? report->masters[f.master].master : ""},
        {"key", f.key},
        {"type", FindingName(f.kind)},
        {"redis_type", f.redis_type},
        {"ttl_ms", f.ttl_ms},
        {"first_seen", IsoTime(f.first_seen_unix_ms)},
        {"first_seen_unix_ms", f.first_seen_unix_ms}};
    if (f.kind == FindingKind::kPartial) leak["copies"] = f.copies;
    leaks.push_back(std::move(leak));
  }
  out["leaks"] = std::move(leaks);
  return out;
}

nlohmann::ordered_json ErrorView(const Failure& failure) {
  return {{"ok", false}, {"error", ErrorCodeName(failure.code)}, {"message", failure.message}};
}

std::string Dump(const nlohmann::ordered_json& json) {
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace lw
