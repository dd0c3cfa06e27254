#include "admin/views.h"

#include <ctime>

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

nlohmann::ordered_json StateView(const Snapshot& s) {
  nlohmann::ordered_json masters = nlohmann::ordered_json::array();
  for (const NodeStatus& n : s.masters) {
    masters.push_back({{"master", n.addr},
                       {"up", n.up},
                       {"rtt_ms", n.rtt_ms},
                       {"reconnects", n.reconnects},
                       {"last_error", n.last_error}});
  }
  nlohmann::ordered_json locks = nlohmann::ordered_json::array();
  for (const LockSnapshot& l : s.locks) {
    locks.push_back({{"resource", l.resource},
                     {"session", l.session},
                     {"pid", l.pid},
                     {"uid", l.uid},
                     {"held_ms", l.held_ms},
                     {"validity_ms", l.validity_ms},
                     {"renew", l.renew},
                     {"waiters", l.waiters}});
  }
  const int margin = s.masters_up - s.quorum;
  return {{"taken_at", IsoTime(s.taken_unix_ms)},
          {"quorum",
           {{"masters", s.masters.size()},
            {"up", s.masters_up},
            {"needed", s.quorum},
            {"margin", margin},
            {"state", margin < 0 ? "lost" : margin == 0 ? "at_risk" : "healthy"}}},
          {"masters", masters},
          {"sessions", s.sessions},
          {"waiters", s.waiters},
          {"locks", locks}};
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
                       {"seconds", m.seconds},
                       {"finished_at", IsoTime(m.finished_unix_ms)}});
  }
  out["last_pass"] = {{"started_at", IsoTime(report->started_unix_ms)},
                      {"started_unix_ms", report->started_unix_ms},
                      {"finished_at", IsoTime(report->finished_unix_ms)},
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

nlohmann::ordered_json ErrorView(std::string_view code, std::string_view message) {
  return {{"ok", false}, {"error", code}, {"message", message}};
}

std::string Dump(const nlohmann::ordered_json& json) {
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace lw
