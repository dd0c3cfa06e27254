#include "agent/agent_id.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "fleet/records.h"

namespace lw {

std::string AgentIdPath(const std::string& socket_path) { return socket_path + ".id"; }

std::string LoadAgentId(const std::string& socket_path) {
  std::ifstream in(AgentIdPath(socket_path));
  std::string id;
  if (in && std::getline(in, id) && fleet::IsWellFormedAgentId(id)) return id;
  return fleet::NewAgentId();
}

std::optional<std::string> SaveAgentId(const std::string& socket_path, const std::string& id) {
  const std::string path = AgentIdPath(socket_path);
  const std::string temp = path + ".new";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << id << "\n";
    out.flush();
    if (!out) return "cannot write " + temp + ": " + std::strerror(errno);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    return "cannot rename " + temp + " to " + path + ": " + why;
  }
  return std::nullopt;
}

}  // namespace lw
