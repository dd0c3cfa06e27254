// Reply and event encoding. Keys are written in a fixed, documented order (id, ok, then the
// payload) so that lines read well in logs and captures; clients must not depend on it.

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <string_view>

#include "protocol/hold_json.h"
#include "protocol/messages.h"

namespace lw::protocol {
namespace {

using Line = nlohmann::ordered_json;

// One compact line. Strings that are not valid UTF-8 (which the decoder never lets in, but an
// engine message might carry) are written with U+FFFD instead of throwing: a reply must
// always go out.
std::string Finish(const Line& line) {
  std::string out = line.dump(-1, ' ', false, Line::error_handler_t::replace);
  out += '\n';
  return out;
}

Line Success(const nlohmann::json& id) {
  Line line;
  line["id"] = id;
  line["ok"] = true;
  return line;
}

// Round trips are shown to the microsecond; a non-finite value (no sample yet) reads as 0.
double RoundRtt(double rtt_ms) {
  if (!std::isfinite(rtt_ms)) return 0;
  return std::round(rtt_ms * 1000) / 1000;
}

// The replies every lock cycle sends (ok, acquired, extended) are written straight into the
// string, not through a JSON tree: building and dumping an ordered_json object cost more than
// the rest of the reply path in the agent's profile. Strings take the fast path only when they
// need no escaping (printable ASCII without quote or backslash, as resource names and tokens
// almost always are); anything else is written by the JSON library, so the bytes are the same
// either way (tests/unit/encode_test.cc compares both paths).
bool Plain(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}

void AppendString(std::string& out, std::string_view s) {
  if (Plain(s)) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AppendId(std::string& out, const nlohmann::json& id) {
  if (id.is_number_unsigned()) {
    out += std::to_string(id.get<uint64_t>());
  } else if (id.is_number_integer()) {
    out += std::to_string(id.get<int64_t>());
  } else if (id.is_string()) {
    AppendString(out, id.get_ref<const std::string&>());
  } else {
    out += id.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

void AppendInt(std::string& out, std::string_view key, int64_t value) {
  out += ",\"";
  out += key;
  out += "\":";
  out += std::to_string(value);
}

std::string SuccessPrefix(const nlohmann::json& id) {
  std::string out;
  out.reserve(160);
  out += "{\"id\":";
  AppendId(out, id);
  out += ",\"ok\":true";
  return out;
}

}  // namespace

std::string EncodeOk(const nlohmann::json& id) { return SuccessPrefix(id) + "}\n"; }

std::string EncodeUpgraded(const nlohmann::json& id, const Upgraded& u) {
  Line line = Success(id);
  line["pid"] = u.pid;
  line["previous_pid"] = u.previous_pid;
  line["version"] = u.version;
  line["handover_ms"] = u.handover_ms;
  line["sessions"] = u.sessions;
  line["locks"] = u.locks;
  return Finish(line);
}

std::string EncodeAcquired(const nlohmann::json& id, std::string_view resource,
                           std::string_view token, int64_t validity_ms, int64_t waited_ms,
                           std::optional<int64_t> fence, HoldMode mode, int permit, int depth) {
  std::string out = SuccessPrefix(id);
  out += ",\"resource\":";
  AppendString(out, resource);
  out += ",\"token\":";
  AppendString(out, token);
  AppendInt(out, "validity_ms", validity_ms);
  AppendInt(out, "waited_ms", waited_ms);
  if (fence) AppendInt(out, "fence", *fence);
  if (mode != HoldMode::kExclusive) {
    out += ",\"mode\":\"";
    out += NameOf(mode);
    out += '"';
    if (mode == HoldMode::kPermit) AppendInt(out, "permit", permit);
  }
  if (depth > 0) AppendInt(out, "depth", depth);
  out += "}\n";
  return out;
}

std::string EncodeAcquiredMany(const nlohmann::json& id, const std::vector<GrantOfMany>& grants,
                               int64_t waited_ms) {
  std::string out = SuccessPrefix(id);
  out += ",\"resources\":[";
  int64_t least = INT64_MAX;
  for (size_t i = 0; i < grants.size(); ++i) {
    const GrantOfMany& g = grants[i];
    least = std::min(least, g.validity_ms);
    out += i == 0 ? "{\"resource\":" : ",{\"resource\":";
    AppendString(out, g.resource);
    out += ",\"token\":";
    AppendString(out, g.token);
    AppendInt(out, "validity_ms", g.validity_ms);
    AppendInt(out, "waited_ms", g.waited_ms);
    if (g.fence) AppendInt(out, "fence", *g.fence);
    if (g.mode != HoldMode::kExclusive) {
      out += ",\"mode\":\"";
      out += NameOf(g.mode);
      out += '"';
      if (g.mode == HoldMode::kPermit) AppendInt(out, "permit", g.permit);
    }
    out += '}';
  }
  out += ']';
  AppendInt(out, "validity_ms", grants.empty() ? 0 : least);
  AppendInt(out, "waited_ms", waited_ms);
  out += "}\n";
  return out;
}

std::string EncodeUnwound(const nlohmann::json& id, int depth) {
  std::string out = SuccessPrefix(id);
  AppendInt(out, "depth", depth);
  out += "}\n";
  return out;
}

std::string EncodeExtended(const nlohmann::json& id, int64_t validity_ms) {
  std::string out = SuccessPrefix(id);
  AppendInt(out, "validity_ms", validity_ms);
  out += "}\n";
  return out;
}

namespace {

// A hold's kind, written unless it is a mutex's: mode, and a semaphore's permits and permit.
void AddMode(Line& line, HoldMode mode, int permits, int permit) {
  if (mode == HoldMode::kExclusive) return;
  line["mode"] = std::string(NameOf(mode));
  if (mode != HoldMode::kPermit) return;
  line["permits"] = permits;
  line["permit"] = permit;
}

Line ToLine(const HeldLock& lock) {
  Line line = {{"resource", lock.resource}, {"token", lock.token},
               {"validity_ms", lock.validity_ms}, {"renew", lock.renew}};
  AddMode(line, lock.mode, lock.permits, lock.permit);
  return line;
}

Line ToLine(const LockView& lock) { return HoldJson(lock, HoldWire::kSocket); }

Line ToLine(const NodeHealthView& node) {
  Line line = {{"addr", node.addr},
               {"tls", node.tls},
               {"up", node.up},
               {"rtt_ms", RoundRtt(node.rtt_ms)},
               {"quarantined", node.quarantined}};
  if (!node.up) line["error"] = node.error;
  if (node.quarantined) {
    line["quarantine_left_ms"] = node.quarantine_left_ms;
    line["quarantine_reason"] = node.quarantine_reason;
  }
  return line;
}

template <typename View>
Line ListOf(const std::vector<View>& items) {
  Line list = Line::array();
  for (const auto& item : items) list.push_back(ToLine(item));
  return list;
}

}  // namespace

std::string EncodeHeld(const nlohmann::json& id, const std::vector<HeldLock>& locks) {
  Line line = Success(id);
  line["locks"] = ListOf(locks);
  return Finish(line);
}

std::string EncodeLocks(const nlohmann::json& id, const std::vector<LockView>& locks) {
  Line line = Success(id);
  line["locks"] = ListOf(locks);
  return Finish(line);
}

std::string EncodeHealth(const nlohmann::json& id, int quorum,
                         const std::vector<NodeHealthView>& nodes,
                         const std::optional<std::string>& admin_url) {
  Line line = Success(id);
  line["quorum"] = quorum;
  line["nodes"] = ListOf(nodes);
  if (admin_url) line["admin_url"] = *admin_url;
  return Finish(line);
}

std::string EncodeError(const nlohmann::json& id, ErrorCode code, std::string_view message) {
  Line line;
  line["id"] = id;
  line["ok"] = false;
  line["error"] = std::string(ErrorCodeName(code));
  line["message"] = std::string(message);
  return Finish(line);
}

std::string EncodeElected(const nlohmann::json& id, std::string_view name, int64_t term,
                          std::string_view token, int64_t validity_ms, int64_t waited_ms) {
  std::string out = SuccessPrefix(id);
  out += ",\"name\":";
  AppendString(out, name);
  AppendInt(out, "term", term);
  out += ",\"token\":";
  AppendString(out, token);
  AppendInt(out, "validity_ms", validity_ms);
  AppendInt(out, "waited_ms", waited_ms);
  out += "}\n";
  return out;
}

namespace {

Line LeaderOrNull(const std::optional<LeaderView>& leader) {
  if (!leader) return nullptr;
  return Line{{"value", leader->value}, {"agent", leader->agent}, {"host", leader->host},
              {"pid", leader->pid},     {"since", leader->since_ms}, {"term", leader->term}};
}

}  // namespace

std::string EncodeLeader(const nlohmann::json& id, std::string_view name,
                         const std::optional<LeaderView>& leader) {
  Line line = Success(id);
  line["name"] = std::string(name);
  line["leader"] = LeaderOrNull(leader);
  return Finish(line);
}

std::string EncodeLeaderEvent(std::string_view name, const std::optional<LeaderView>& leader,
                              int64_t term, bool missed) {
  Line line;
  line["event"] = "leader";
  line["name"] = std::string(name);
  line["leader"] = LeaderOrNull(leader);
  line["term"] = term;
  line["missed"] = missed;
  return Finish(line);
}

std::string EncodeLost(std::string_view resource, std::string_view token, std::string_view reason) {
  Line line;
  line["event"] = "lost";
  line["resource"] = std::string(resource);
  line["token"] = std::string(token);
  line["reason"] = std::string(reason);
  return Finish(line);
}

}  // namespace lw::protocol
