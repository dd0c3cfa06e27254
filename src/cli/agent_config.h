#pragma once
// Where the client subcommands find the local agent. Every one of them (lock, acquire, release,
// extend, elect, leader, status, upgrade; who and status --fleet for the admin API) reads the
// agent's configuration the same way, so that `--config FILE` finds the agent `serve --config
// FILE` started.

#include <string>
#include <variant>

namespace lw::cli {

// What a client subcommand reads of the agent's configuration, as the agent reads it:
// LOCKWARDEN_SOCKET_PATH, LOCKWARDEN_ADMIN_LISTEN and LOCKWARDEN_ADMIN_TOKEN_FILE over the TOML
// file's keys. Only these settings are read: the rest of the file, and its secrets, are the
// agent's. "" where neither sets one.
struct AgentConfig {
  std::string socket_path;
  std::string admin_listen;
  std::string admin_token_file;
};

// The configuration at config_path (--config), else at $LOCKWARDEN_CONFIG, else the
// environment alone; a message for people when the file cannot be read or parsed.
std::variant<AgentConfig, std::string> ReadAgentConfig(const std::string& config_path);

// What the command line says about the agent's socket.
struct SocketArgs {
  std::string socket;       // --socket; "": not given
  std::string config_path;  // --config; "": $LOCKWARDEN_CONFIG, if set
};

struct SocketPath {
  std::string path;
};

// The socket to connect to: --socket, else $LOCKWARDEN_SOCKET, else socket_path of the agent's
// configuration (ReadAgentConfig), else the agent's default (/run/lockwarden/lockwarden.sock).
// The configuration is read only when neither of the first two is set; a message for people
// when it cannot be.
std::variant<SocketPath, std::string> ResolveSocket(const SocketArgs& args);

}  // namespace lw::cli
