#include "cli/agent_config.h"

#include <cstdlib>
#include <toml++/toml.h>

#include "config/config.h"

namespace lw::cli {
namespace {

// The variable's value, or "" when unset.
std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::variant<AgentConfig, std::string> ReadAgentConfig(const std::string& config_path) {
  const std::string path = config_path.empty() ? Env("LOCKWARDEN_CONFIG") : config_path;
  AgentConfig out;
  if (!path.empty()) {
    try {
      const toml::table table = toml::parse_file(path);
      out.socket_path = table["socket_path"].value_or(std::string());
      out.admin_listen = table["admin_listen"].value_or(std::string());
      out.admin_token_file = table["admin_token_file"].value_or(std::string());
    } catch (const toml::parse_error& e) {
      return path + ": " + std::string(e.description());
    }
  }
  for (auto [name, value] : {std::pair{"LOCKWARDEN_SOCKET_PATH", &out.socket_path},
                             std::pair{"LOCKWARDEN_ADMIN_LISTEN", &out.admin_listen},
                             std::pair{"LOCKWARDEN_ADMIN_TOKEN_FILE", &out.admin_token_file}}) {
    if (const char* env = std::getenv(name)) *value = env;
  }
  return out;
}

std::variant<SocketPath, std::string> ResolveSocket(const SocketArgs& args) {
  if (!args.socket.empty()) return SocketPath{args.socket};
  if (std::string env = Env("LOCKWARDEN_SOCKET"); !env.empty()) return SocketPath{env};
  auto config = ReadAgentConfig(args.config_path);
  if (auto* error = std::get_if<std::string>(&config)) {
    return "cannot read the agent's configuration for its socket_path: " + *error;
  }
  const std::string& configured = std::get<AgentConfig>(config).socket_path;
  return SocketPath{configured.empty() ? Config{}.socket_path : configured};
}

}  // namespace lw::cli
