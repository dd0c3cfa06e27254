// Reply and event encoding. Keys are written in a fixed, documented order (id, ok, then the
// payload) so that lines read well in logs and captures; clients must not depend on it.

#include <cmath>
#include <string>
#include <string_view>

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

}  // namespace

std::string EncodeOk(const nlohmann::json& id) { return Finish(Success(id)); }

std::string EncodeAcquired(const nlohmann::json& id, std::string_view resource,
                           std::string_view token, int64_t validity_ms, int64_t waited_ms,
                           std::optional<int64_t> fence) {
  Line line = Success(id);
  line["resource"] = std::string(resource);
  line["token"] = std::string(token);
  line["validity_ms"] = validity_ms;
  line["waited_ms"] = waited_ms;
  if (fence) line["fence"] = *fence;
  return Finish(line);
}

std::string EncodeExtended(const nlohmann::json& id, int64_t validity_ms) {
  Line line = Success(id);
  line["validity_ms"] = validity_ms;
  return Finish(line);
}

namespace {

Line ToLine(const HeldLockView& lock) {
  return {{"resource", lock.resource}, {"token", lock.token},
          {"validity_ms", lock.validity_ms}, {"renew", lock.renew}};
}

Line ToLine(const AgentLockView& lock) {
  return {{"resource", lock.resource}, {"session", lock.session},
          {"pid", lock.pid},           {"uid", lock.uid},
          {"held_ms", lock.held_ms},   {"validity_ms", lock.validity_ms},
          {"renew", lock.renew},       {"waiters", lock.waiters}};
}

Line ToLine(const NodeHealthView& node) {
  Line line = {{"addr", node.addr},
               {"up", node.up},
               {"rtt_ms", RoundRtt(node.rtt_ms)},
               {"quarantined", node.quarantined}};
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

std::string EncodeHeld(const nlohmann::json& id, const std::vector<HeldLockView>& locks) {
  Line line = Success(id);
  line["locks"] = ListOf(locks);
  return Finish(line);
}

std::string EncodeLocks(const nlohmann::json& id, const std::vector<AgentLockView>& locks) {
  Line line = Success(id);
  line["locks"] = ListOf(locks);
  return Finish(line);
}

std::string EncodeHealth(const nlohmann::json& id, int quorum,
                         const std::vector<NodeHealthView>& nodes) {
  Line line = Success(id);
  line["quorum"] = quorum;
  line["nodes"] = ListOf(nodes);
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

std::string EncodeLost(std::string_view resource, std::string_view token, std::string_view reason) {
  Line line;
  line["event"] = "lost";
  line["resource"] = std::string(resource);
  line["token"] = std::string(token);
  line["reason"] = std::string(reason);
  return Finish(line);
}

}  // namespace lw::protocol
