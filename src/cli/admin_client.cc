#include "cli/admin_client.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/agent_config.h"
#include "cli/commands.h"
#include "client/client.h"

namespace lw::cli {
namespace {

constexpr const char* kDefaultAdmin = "http://127.0.0.1:9477";
// The fleet endpoints wait up to 5 s for a view; a revoke waits for the holder's agent.
constexpr time_t kReadTimeoutSeconds = 15;

std::string Trimmed(std::string text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return Trimmed(text.str());
}

// admin_listen ("host:port" or "off") as a URL to connect to: a wildcard host is reached on
// loopback. Either url or error is set.
struct ListenUrl {
  std::string url;
  std::string error;
};
ListenUrl UrlOfListen(const std::string& listen) {
  auto parsed = ParseListenAddress(listen);
  if (auto* error = std::get_if<std::string>(&parsed)) return {"", "admin_listen: " + *error};
  const auto& address = std::get<std::optional<ListenAddress>>(parsed);
  if (!address) return {"", "admin_listen is off: the agent has no admin API to ask"};
  return {LocalUrl(*address), ""};
}

AdminFailure Usage(std::string message) { return {kExitUsage, 0, "", std::move(message)}; }

// What the agent at socket `path` says of its admin API (its health reply's admin_url): the URL,
// or nullopt with `error` set (kExitUnavailable when the agent could not be asked).
std::optional<std::string> AskAgentForAdmin(const std::string& path, AdminFailure& error) {
  try {
    client::Client agent(path);
    const nlohmann::json reply = agent.Call({{"op", "health"}}, std::chrono::seconds(5));
    const auto url = reply.find("admin_url");
    if (url == reply.end() || !url->is_string()) {
      error = Usage("the agent at " + path + " does not say where its admin API is (a version " +
                    "before 2026-11-30?): name it with --admin");
      return std::nullopt;
    }
    if (url->get<std::string>().empty()) {
      error = Usage("the agent at " + path + " has no admin API (admin_listen = off)");
      return std::nullopt;
    }
    return url->get<std::string>();
  } catch (const client::ClientError& e) {
    error = {kExitUnavailable, 0, "",
             "cannot ask the agent at " + path + " where its admin API is: " + e.what()};
    return std::nullopt;
  }
}

}  // namespace

std::variant<AdminEndpoint, AdminFailure> ResolveAdmin(const AdminArgs& args) {
  auto config = ReadAgentConfig(args.config_path);
  if (auto* error = std::get_if<std::string>(&config)) return Usage(*error);
  const AgentConfig& from_config = std::get<AgentConfig>(config);
  AdminEndpoint out;
  AdminFailure error;
  if (!args.url.empty()) {
    out.url = args.url.find("://") == std::string::npos ? "http://" + args.url : args.url;
  } else if (const char* env = std::getenv("LOCKWARDEN_SOCKET");
             !args.socket.empty() || (env != nullptr && *env != '\0')) {
    // The agent named by its socket, the way every client command finds it.
    const auto path = std::get<SocketPath>(ResolveSocket({args.socket, args.config_path})).path;
    auto url = AskAgentForAdmin(path, error);
    if (!url) return error;
    out.url = *url;
  } else if (!from_config.admin_listen.empty()) {
    ListenUrl url = UrlOfListen(from_config.admin_listen);
    if (!url.error.empty()) return Usage(url.error);
    out.url = url.url;
  } else {
    // The agent at the default socket, if one answers there; else the default address.
    auto socket = ResolveSocket({"", args.config_path});
    const auto* path = std::get_if<SocketPath>(&socket);
    auto url = path != nullptr ? AskAgentForAdmin(path->path, error) : std::nullopt;
    out.url = url.value_or(kDefaultAdmin);
  }
  if (!args.token_file.empty()) {
    auto token = ReadFile(args.token_file);
    if (!token) return Usage("--admin-token-file: cannot read " + args.token_file);
    out.token = *token;
  } else if (const char* env = std::getenv("LOCKWARDEN_ADMIN_TOKEN")) {
    out.token = Trimmed(env);
  } else if (!from_config.admin_token_file.empty()) {
    // The agent's own token file, when this user may read it; otherwise none is sent (a
    // loopback listener needs none for reads).
    out.token = ReadFile(from_config.admin_token_file).value_or("");
  }
  return out;
}

std::variant<nlohmann::json, AdminFailure> AdminGet(const AdminEndpoint& endpoint,
                                                   const std::string& path,
                                                   const std::multimap<std::string, std::string>& query) {
  httplib::Client client(endpoint.url);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(kReadTimeoutSeconds, 0);
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (!endpoint.token.empty()) headers.emplace("Authorization", "Bearer " + endpoint.token);
  auto res = client.Get(path, httplib::Params(query.begin(), query.end()), headers);
  if (!res) {
    return AdminFailure{kExitUnavailable, 0, "",
                        "cannot reach the agent's admin API at " + endpoint.url + " (" +
                            httplib::to_string(res.error()) +
                            "); is the agent running? --admin sets the address"};
  }
  nlohmann::json body = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (res->status == 200 && body.is_object()) return body;
  AdminFailure failure;
  failure.http_status = res->status;
  failure.code = body.is_object() ? body.value("error", "") : "";
  failure.message = body.is_object() ? body.value("message", "") : "";
  if (failure.message.empty()) failure.message = "HTTP " + std::to_string(res->status);
  if (res->status == 401) {
    failure.message += " (give the admin token: --admin-token-file or LOCKWARDEN_ADMIN_TOKEN)";
  }
  failure.exit_code = res->status == 400 ? kExitUsage : kExitUnavailable;
  return failure;
}

}  // namespace lw::cli
