// `lockwarden acquire --detach RESOURCE`, `release RESOURCE TOKEN`, `extend RESOURCE TOKEN`:
// a detached lease, which outlives the process that took it (docs/protocol.md, "detach").

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/quorum_report.h"
#include "client/client.h"

namespace lw::cli {
namespace {

// One request on a fresh connection (after `before`, when given); the reply, or nullopt (said on
// stderr) when the agent could not be reached or did not answer.
std::optional<nlohmann::json> Ask(const LeaseArgs& a, nlohmann::json request,
                                  std::chrono::milliseconds timeout,
                                  const std::function<void(client::Client&)>& before = {}) {
  try {
    client::Client c(a.socket_path);
    if (before) before(c);
    return c.Call(std::move(request), timeout);
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: %s\n", e.what());
    return std::nullopt;
  }
}

// The exit code of a failed reply, said on stderr (`what`: "acquire", "release", "extend").
int Failed(const LeaseArgs& a, const char* what, const nlohmann::json& reply) {
  const std::string code = reply.value("error", "internal");
  std::fprintf(stderr, "lockwarden: could not %s \"%s\": %s: %s\n", what, a.resource.c_str(),
               code.c_str(), reply.value("message", "").c_str());
  return ExitCodeOfError(code, a.conflict_exit_code);
}

// The reply as the --json output: what the agent said, without the request's id.
void PrintJson(nlohmann::json reply) {
  reply.erase("id");
  std::printf("%s\n", reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

}  // namespace

int RunAcquireDetached(const LeaseArgs& a) {
  nlohmann::json request = {{"op", "acquire"}, {"resource", a.resource}, {"wait_ms", a.wait_ms},
                            {"detach", true}};
  if (a.ttl_ms > 0) request["ttl_ms"] = a.ttl_ms;
  if (a.fence) request["fence"] = true;
  const auto reply = Ask(a, std::move(request), std::chrono::milliseconds(a.wait_ms + 30'000),
                         [&a](client::Client& c) {
                           SayIfWaitingForQuorum(c, "acquire \"" + a.resource + "\"", a.wait_ms);
                         });
  if (!reply) return kExitUnavailable;
  if (!reply->value("ok", false)) return Failed(a, "acquire", *reply);
  if (a.json) {
    PrintJson(*reply);
    return 0;
  }
  // "TOKEN", or "TOKEN FENCE" for a fenced grant: one line for `read -r token fence`.
  const auto fence = reply->find("fence");
  std::string line = reply->value("token", "");
  if (fence != reply->end() && fence->is_number_integer()) {
    line += " " + std::to_string(fence->get<int64_t>());
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

int RunRelease(const LeaseArgs& a) {
  const auto reply = Ask(a, {{"op", "release"}, {"resource", a.resource}, {"token", a.token}},
                         client::Client::kDefaultTimeout);
  if (!reply) return kExitUnavailable;
  if (!reply->value("ok", false)) return Failed(a, "release", *reply);
  if (a.json) PrintJson(*reply);
  return 0;
}

int RunExtend(const LeaseArgs& a) {
  nlohmann::json request = {{"op", "extend"}, {"resource", a.resource}, {"token", a.token}};
  if (a.ttl_ms > 0) request["ttl_ms"] = a.ttl_ms;
  const auto reply = Ask(a, std::move(request), client::Client::kDefaultTimeout);
  if (!reply) return kExitUnavailable;
  if (!reply->value("ok", false)) return Failed(a, "extend", *reply);
  if (a.json) {
    PrintJson(*reply);
  } else {
    std::printf("%lld\n", static_cast<long long>(reply->value("validity_ms", int64_t{0})));
  }
  return 0;
}

}  // namespace lw::cli
