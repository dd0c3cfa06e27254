#pragma once
// The agent's id outlives its process: every value it stores on the masters starts with it
// (EngineOptions::value_prefix), so a client of the agent's next run, on the same socket, can
// resume what it held (LockEngine::Resume). It is kept in a file beside the socket: the socket's
// directory is the agent's own (and on /run, it is gone after a reboot, when nothing held
// before can still be valid).

#include <optional>
#include <string>

namespace lw {

// "<socket_path>.id".
std::string AgentIdPath(const std::string& socket_path);
// The id kept there, or a new one when there is none (or it is not an agent id).
std::string LoadAgentId(const std::string& socket_path);
// Keeps `id` there (written whole, then renamed into place). A human error on failure: the
// agent's next run then cannot resume this run's locks.
std::optional<std::string> SaveAgentId(const std::string& socket_path, const std::string& id);

}  // namespace lw
