// An election candidate's payload (core/election_record.h ElectionRecord::payload): written by
// the agent a campaign goes through, read back by any agent that reads the record.

#include <string>
#include <string_view>

#include "protocol/messages.h"

namespace lw::protocol {

std::string EncodeCandidate(std::string_view value, std::string_view agent, std::string_view host,
                            int64_t pid) {
  nlohmann::ordered_json payload = {{"value", std::string(value)},
                                    {"agent", std::string(agent)},
                                    {"host", std::string(host)},
                                    {"pid", pid}};
  return payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LeaderView LeaderViewOf(const ElectionRecord& record) {
  LeaderView view;
  view.term = record.term;
  view.since_ms = record.since_ms;
  const auto payload = nlohmann::json::parse(record.payload, nullptr, /*allow_exceptions=*/false);
  if (!payload.is_object()) return view;
  const auto text = [&](const char* key, std::string& out) {
    if (auto it = payload.find(key); it != payload.end() && it->is_string()) out = *it;
  };
  text("value", view.value);
  text("agent", view.agent);
  text("host", view.host);
  if (auto it = payload.find("pid"); it != payload.end() && it->is_number_integer()) {
    view.pid = it->get<int64_t>();
  }
  return view;
}

}  // namespace lw::protocol
