#include "fleet/records.h"

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "core/token.h"
#include "protocol/json_fields.h"

namespace lw::fleet {
namespace {

constexpr size_t kAgentIdChars = 16;

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Bounds of the strings read back (besides kMaxCmdlineBytes): a resource name, the lock key
// and value of a revoke, the prefixes of the settings, and the short texts of a record.
constexpr size_t kMaxResourceBytes = protocol::kMaxReportedResourceBytes;
constexpr size_t kMaxKeyBytes = 2048;
constexpr size_t kMaxTextBytes = 256;

std::string Named(std::string_view kind, std::string_view id) {
  std::string out(kNamespace);
  out += kind;
  out += id;
  return out;
}

}  // namespace

std::string AgentsIndexKey() { return Named("agents", ""); }
std::string MarkingIndexKey() { return Named("agents:marking", ""); }
std::string AgentKey(std::string_view agent_id) { return Named("agent:", agent_id); }
std::string HoldersKey(std::string_view agent_id) { return Named("holders:", agent_id); }
std::string RevokeChannel(std::string_view agent_id) { return Named("revoke:", agent_id); }
std::string ReporterKey() { return Named("reporter", ""); }

std::string NewAgentId() { return NewToken().substr(0, kAgentIdChars); }

bool IsWellFormedAgentId(std::string_view id) {
  if (id.size() != kAgentIdChars) return false;
  for (char c : id) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

std::string LockValue(std::string_view agent_id, std::string_view token) {
  std::string out;
  out.reserve(agent_id.size() + 1 + token.size());
  out += agent_id;
  out += ':';
  out += token;
  return out;
}

std::optional<std::string> AgentOfValue(std::string_view value) {
  const size_t colon = value.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view id = value.substr(0, colon);
  if (!IsWellFormedAgentId(id)) return std::nullopt;
  return std::string(id);
}

std::string HoldId(std::string_view value) {
  uint64_t h = 14695981039346656037ull;
  for (char c : value) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = kHex[h & 0xF];
  return out;
}

bool IsWellFormedHoldId(std::string_view id) { return IsWellFormedAgentId(id); }

// ---- Encoding and decoding ---------------------------------------------------------------------

namespace {

using Json = nlohmann::json;

using Fields = protocol::JsonFields;

// The JSON object `text` holds; nullopt when it is too large, not JSON, or not an object.
std::optional<Json> ParseObject(std::string_view text) {
  if (text.size() > kMaxEntryBytes) return std::nullopt;
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  return j;
}

// The value `read` makes of the object in `text`; nullopt when `text` is not such an object or
// a field `read` asked for was missing, of the wrong type or out of bounds.
template <typename T, typename Read>
std::optional<T> DecodeWith(std::string_view text, Read read) {
  const std::optional<Json> j = ParseObject(text);
  if (!j) return std::nullopt;
  Fields f(*j);
  T value = read(f);
  if (!f.ok()) return std::nullopt;
  return value;
}

// Invalid UTF-8 (a binary resource name, a command line) is replaced rather than thrown on.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// At most max_bytes of s, cut at a UTF-8 character boundary.
std::string Bounded(const std::string& s, size_t max_bytes) {
  return std::string(ShortenUtf8(s, max_bytes));
}

Json SettingsJson(const SafetySettings& s) {
  return {{"key_prefix", s.key_prefix},     {"max_ttl_ms", s.max_ttl_ms},
          {"drift_factor", s.drift_factor}, {"restart_quarantine", s.restart_quarantine},
          {"fence_prefix", s.fence_prefix}, {"fence_quorum", s.fence_quorum}};
}

SafetySettings ReadSettings(Fields& f) {
  SafetySettings s;
  s.key_prefix = f.Text("key_prefix", kMaxResourceBytes);
  s.max_ttl_ms = f.Ms("max_ttl_ms");
  s.drift_factor = f.Number("drift_factor", 0, 1);
  s.restart_quarantine = f.Bool("restart_quarantine");
  s.fence_prefix = f.Text("fence_prefix", kMaxResourceBytes);
  s.fence_quorum = f.Int("fence_quorum", 0, 1'000);
  return s;
}

Json WaiterJson(const WaiterDetail& w) {
  Json j = {{"resource", w.resource},
            {"pid", w.pid},
            {"uid", w.uid},
            {"cmdline", Bounded(w.cmdline, kMaxCmdlineBytes)},
            {"since_unix_ms", w.since_unix_ms}};
  if (w.actor_pid >= 0 && w.actor_pid != w.pid) j["actor_pid"] = w.actor_pid;
  if (w.mode == HoldMode::kExclusive) return j;  // absent: exclusive (protocol::ReadMode)
  j["mode"] = std::string(NameOf(w.mode));
  if (w.mode == HoldMode::kPermit) j["permits"] = w.permits;
  return j;
}

WaiterDetail ReadWaiter(Fields& f) {
  WaiterDetail w;
  w.resource = f.Text("resource", kMaxResourceBytes);
  w.pid = f.Small("pid", -1);
  w.actor_pid = f.SmallOr("actor_pid", -1);
  w.uid = f.Small("uid", -1);
  w.cmdline = f.Text("cmdline", kMaxCmdlineBytes);
  w.since_unix_ms = f.Ms("since_unix_ms");
  protocol::ReadMode(f, w.mode, w.permits, nullptr);
  return w;
}

// Each element of `list` read with `read` (which must see an object); false on the first bad one.
template <typename T, typename Read>
bool ReadEach(const Json* list, std::vector<T>& out, Read read) {
  if (list == nullptr) return false;
  for (const Json& item : *list) {
    if (!item.is_object()) return false;
    Fields f(item);
    T value = read(f);
    if (!f.ok()) return false;
    out.push_back(std::move(value));
  }
  return true;
}

}  // namespace

std::string Encode(const AgentRecord& r) {
  return Dump({{"id", r.id},
               {"name", Bounded(r.name, kMaxTextBytes)},
               {"host", Bounded(r.host, kMaxTextBytes)},
               {"pid", r.pid},
               {"version", Bounded(r.version, kMaxTextBytes)},
               {"admin_url", Bounded(r.admin_url, kMaxTextBytes)},
               {"started_unix_ms", r.started_unix_ms},
               {"heartbeat_unix_ms", r.heartbeat_unix_ms},
               {"heartbeat_ttl_ms", r.heartbeat_ttl_ms},
               {"settings", SettingsJson(r.settings)}});
}

std::string Encode(const HolderReport& r) {
  Json locks = Json::array(), waiters = Json::array();
  for (size_t i = 0; i < r.locks.size() && i < kMaxPublishedLocks; ++i) {
    locks.push_back(Json(protocol::HoldJson(r.locks[i], protocol::HoldWire::kReport)));
  }
  for (size_t i = 0; i < r.waiters.size() && i < kMaxPublishedWaiters; ++i) {
    waiters.push_back(WaiterJson(r.waiters[i]));
  }
  return Dump({{"unix_ms", r.unix_ms},
               {"locks_total", r.locks_total},
               {"waiters_total", r.waiters_total},
               {"locks", std::move(locks)},
               {"waiters", std::move(waiters)}});
}

std::string Encode(const RevokeOrder& r) {
  return Dump({{"key", r.key}, {"value", r.value}, {"by", Bounded(r.by, kMaxTextBytes)}});
}

std::optional<AgentRecord> DecodeAgentRecord(std::string_view text) {
  return DecodeWith<AgentRecord>(text, [](Fields& f) {
    AgentRecord r;
    r.id = f.Text("id", kMaxTextBytes);
    r.name = f.Text("name", kMaxTextBytes);
    r.host = f.Text("host", kMaxTextBytes);
    r.pid = f.Small("pid", 0);
    r.version = f.Text("version", kMaxTextBytes);
    r.admin_url = f.Text("admin_url", kMaxTextBytes);
    r.started_unix_ms = f.Ms("started_unix_ms");
    r.heartbeat_unix_ms = f.Ms("heartbeat_unix_ms");
    r.heartbeat_ttl_ms = f.Ms("heartbeat_ttl_ms");
    f.Require(IsWellFormedAgentId(r.id));
    if (const Json* settings = f.Object("settings")) {
      Fields s(*settings);
      r.settings = ReadSettings(s);
      f.Require(s.ok());
    }
    return r;
  });
}

std::optional<HolderReport> DecodeHolderReport(std::string_view text) {
  return DecodeWith<HolderReport>(text, [](Fields& f) {
    HolderReport r;
    r.unix_ms = f.Ms("unix_ms");
    r.locks_total = static_cast<uint64_t>(f.Ms("locks_total"));
    r.waiters_total = static_cast<uint64_t>(f.Ms("waiters_total"));
    f.Require(ReadEach(f.List("locks", kMaxPublishedLocks), r.locks, protocol::ReadHold) &&
              ReadEach(f.List("waiters", kMaxPublishedWaiters), r.waiters, ReadWaiter));
    return r;
  });
}

std::optional<RevokeOrder> DecodeRevokeOrder(std::string_view text) {
  return DecodeWith<RevokeOrder>(text, [](Fields& f) {
    RevokeOrder r;
    r.key = f.Text("key", kMaxKeyBytes);
    r.value = f.Text("value", kMaxResourceBytes);
    r.by = f.Text("by", kMaxTextBytes);
    f.Require(!r.key.empty() && !r.value.empty());
    return r;
  });
}

}  // namespace lw::fleet
