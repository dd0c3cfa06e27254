// `lockwarden status`: masters, quorum and this connection's view of the agent.

#include <cstdio>

#include "cli/commands.h"
#include "client/client.h"

namespace lw::cli {

int RunStatus(const std::string& socket_path, bool json) {
  nlohmann::json health, locks;
  try {
    client::Client c(socket_path);
    health = c.Health();
    locks = c.Call({{"op", "locks"}});
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: %s\n", e.what());
    return kExitUnavailable;
  }
  const int quorum = health.value("quorum", 0);
  int up = 0;
  for (const auto& n : health.value("nodes", nlohmann::json::array())) up += n.value("up", false);
  const bool healthy = up >= quorum && quorum > 0;
  if (json) {
    nlohmann::json out = {{"socket", socket_path}, {"quorum", quorum}, {"masters_up", up},
                          {"nodes", health.value("nodes", nlohmann::json::array())},
                          {"locks", locks.value("locks", nlohmann::json::array())}};
    std::printf("%s\n", out.dump(2).c_str());
    return healthy ? 0 : kExitUnavailable;
  }
  const auto& nodes = health["nodes"];
  std::printf("agent   %s\nmasters %d up of %zu, quorum %d: %s\n", socket_path.c_str(), up,
              nodes.size(), quorum,
              !healthy ? "QUORUM LOST (no lock can be granted)"
              : up - quorum == 0 ? "at risk (one more failure loses quorum)"
                                 : "healthy");
  for (const auto& n : nodes) {
    const bool node_up = n.value("up", false);
    std::printf("  %-24s %-4s", n.value("addr", "?").c_str(), node_up ? "up" : "DOWN");
    if (node_up) std::printf(" rtt %.2f ms", n.value("rtt_ms", 0.0));
    std::printf("\n");
  }
  const auto all = locks.value("locks", nlohmann::json::array());
  std::printf("locks   %zu held through this agent\n", all.size());
  for (const auto& l : all) {
    std::printf("  %-32s pid %-7d held %lld ms, valid %lld ms%s, %d waiting\n",
                l.value("resource", "").c_str(), l.value("pid", -1),
                static_cast<long long>(l.value("held_ms", 0)),
                static_cast<long long>(l.value("validity_ms", 0)),
                l.value("renew", false) ? ", renewing" : "", l.value("waiters", 0));
  }
  return healthy ? 0 : kExitUnavailable;
}

}  // namespace lw::cli
