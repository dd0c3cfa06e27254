#pragma once
// Reading GET /api/v1/state of a test's agent.

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "support/agent_process.h"

namespace lw::test {

// The agent's state, or an empty object when the admin listener does not answer 200.
nlohmann::json State(const AgentProcess& agent);

// The state once `condition` holds of it (re-read every snapshot, which the agent takes every
// 250 ms), or the last one read when `deadline` passes.
nlohmann::json StateWhen(const AgentProcess& agent,
                         const std::function<bool(const nlohmann::json&)>& condition,
                         std::chrono::milliseconds deadline = std::chrono::milliseconds(5000));

// True when state.events has one of `kind` whose message contains `text`.
bool HasEvent(const nlohmann::json& state, const std::string& kind, const std::string& text);

}  // namespace lw::test
