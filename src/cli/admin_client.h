#pragma once
// The CLI's side of the local agent's admin HTTP API (docs/api.md), for the commands that read
// the fleet: where the API is (--admin; else, with --socket or LOCKWARDEN_SOCKET, what that agent
// says in its `health` reply; else the config's admin_listen; else what the agent at the
// config's or the default socket says; else 127.0.0.1:9477), the token a listener beyond
// loopback needs, and one GET.

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <variant>

#include "config/config.h"

namespace lw::cli {

// What the user said on the command line about the admin API.
struct AdminArgs {
  std::string url;         // --admin: "http://host:port" or "host:port"; "": from the config
  std::string socket;      // --socket: the agent to ask where its admin API is; "": not given
  std::string token_file;  // --admin-token-file; "": LOCKWARDEN_ADMIN_TOKEN, then the config's
  std::string config_path;  // --config; "": $LOCKWARDEN_CONFIG, if set (ReadAgentConfig)
};

struct AdminEndpoint {
  std::string url;    // "http://127.0.0.1:9477"
  std::string token;  // "": none sent
};

// An answer of the API that is not a JSON 200.
struct AdminFailure {
  int exit_code = 0;    // kExitUnavailable or kExitUsage
  int http_status = 0;  // 0: no answer at all
  std::string code;     // the API's machine code ("not_found", "unavailable"...), or ""
  std::string message;  // for people
};

// The endpoint to ask, or why there is none: kExitUsage with a message for people (a config
// that does not load, admin_listen off, a token file that cannot be read), kExitUnavailable
// when the agent named by its socket cannot be asked.
std::variant<AdminEndpoint, AdminFailure> ResolveAdmin(const AdminArgs& args);

// GET path?query (the values encoded here) and its JSON body.
std::variant<nlohmann::json, AdminFailure> AdminGet(
    const AdminEndpoint& endpoint, const std::string& path,
    const std::multimap<std::string, std::string>& query);

}  // namespace lw::cli
