// `lockwarden upgrade`: the running agent hands everything over to the binary now at its path
// (docs/upgrade.md) and the new process answers. Exit 0 upgraded, 69 not (the old agent keeps
// serving, or could not be reached), 64 refused (not root or the agent's user).

#include <cstdio>

#include "cli/commands.h"
#include "client/client.h"

namespace lw::cli {

int RunUpgrade(const std::string& socket_path, int64_t timeout_ms, bool json) {
  nlohmann::json reply;
  try {
    client::Client c(socket_path);
    reply = c.Call({{"op", "upgrade"}}, std::chrono::milliseconds(timeout_ms));
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: upgrade: %s\n", e.what());
    return kExitUnavailable;
  }
  if (json) {
    reply.erase("id");
    std::printf("%s\n", reply.dump().c_str());
  }
  if (!reply.value("ok", false)) {
    const std::string code = reply.value("error", "internal");
    std::fprintf(stderr, "lockwarden: upgrade: %s: %s\n", code.c_str(),
                 reply.value("message", "").c_str());
    return code == "forbidden" || code == "bad_request" ? kExitUsage : kExitUnavailable;
  }
  if (!json) {
    std::printf("upgraded: pid %d -> %d (version %s), %zu session(s) and %zu lock(s) handed "
                "over; requests held %lld ms\n",
                reply.value("previous_pid", 0), reply.value("pid", 0),
                reply.value("version", "").c_str(), reply.value("sessions", size_t{0}),
                reply.value("locks", size_t{0}),
                static_cast<long long>(reply.value("handover_ms", int64_t{0})));
  }
  return 0;
}

}  // namespace lw::cli
