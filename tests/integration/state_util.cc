#include "state_util.h"

#include "support/http.h"
#include "test_util.h"

namespace lw::test {

using nlohmann::json;

json State(const AgentProcess& agent) {
  const HttpResult r = HttpGet(agent.admin_port(), "/api/v1/state");
  if (r.status != 200) return json::object();
  return json::parse(r.body);
}

json StateWhen(const AgentProcess& agent, const std::function<bool(const json&)>& condition,
               milliseconds deadline) {
  json last;
  Eventually(
      [&] {
        last = State(agent);
        return !last.empty() && condition(last);
      },
      deadline);
  return last;
}

bool HasEvent(const json& state, const std::string& kind, const std::string& text) {
  for (const json& e : state.value("events", json::array())) {
    if (e["kind"] == kind && e["message"].get<std::string>().find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace lw::test
