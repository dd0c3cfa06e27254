#include "fleet/records.h"

#include "core/token.h"

namespace lw::fleet {
namespace {

constexpr size_t kAgentIdChars = 16;

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

std::string Named(std::string_view kind, std::string_view id) {
  std::string out(kNamespace);
  out += kind;
  out += id;
  return out;
}

}  // namespace

std::string AgentsIndexKey() { return Named("agents", ""); }
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

}  // namespace lw::fleet
