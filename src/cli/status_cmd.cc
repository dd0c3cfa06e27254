// `lockwarden status`: masters, quorum and this connection's view of the agent.

#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "client/client.h"
#include "core/duration.h"

namespace lw::cli {
namespace {

// Adds "holders" to each lock: how many holds of its resource this agent lists (n of K for a
// semaphore's permits, the readers of a shared hold).
void CountHolders(nlohmann::json& locks) {
  std::map<std::string, int> holders;
  for (const auto& l : locks) ++holders[l.value("resource", "")];
  for (auto& l : locks) l["holders"] = holders[l.value("resource", "")];
}

// "exclusive", "permit 1, 2 of 4", "shared (3 readers)".
std::string KindOf(const nlohmann::json& l) {
  const std::string mode = l.value("mode", "exclusive");
  const int n = l.value("holders", 1);
  if (mode == "permit") {
    return "permit " + std::to_string(l.value("permit", -1)) + ", " + std::to_string(n) +
           " of " + std::to_string(l.value("permits", 0));
  }
  if (mode == "shared") return "shared (" + std::to_string(n) + (n == 1 ? " reader)" : " readers)");
  return mode;
}

}  // namespace

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
  int up = 0, usable = 0;  // usable: up and out of restart quarantine (its votes count)
  for (const auto& n : health.value("nodes", nlohmann::json::array())) {
    const bool node_up = n.value("up", false);
    up += node_up;
    usable += node_up && !n.value("quarantined", false);
  }
  const bool healthy = usable >= quorum && quorum > 0;
  auto all = locks.value("locks", nlohmann::json::array());
  CountHolders(all);
  if (json) {
    nlohmann::json out = {{"socket", socket_path}, {"quorum", quorum}, {"masters_up", up},
                          {"masters_usable", usable},
                          {"nodes", health.value("nodes", nlohmann::json::array())},
                          {"locks", all}};
    std::printf("%s\n", out.dump(2).c_str());
    return healthy ? 0 : kExitUnavailable;
  }
  const auto& nodes = health["nodes"];
  const std::string quarantined =
      up > usable ? " (" + std::to_string(up - usable) + " in restart quarantine)" : "";
  std::printf("agent   %s\nmasters %d up of %zu%s, quorum %d: %s\n", socket_path.c_str(), up,
              nodes.size(), quarantined.c_str(), quorum,
              !healthy ? "QUORUM LOST (no lock can be granted)"
              : usable - quorum == 0 ? "at risk (one more failure loses quorum)"
                                     : "healthy");
  for (const auto& n : nodes) {
    const bool node_up = n.value("up", false);
    std::printf("  %-24s %-4s", n.value("addr", "?").c_str(), node_up ? "up" : "DOWN");
    if (node_up) std::printf(" rtt %.2f ms", n.value("rtt_ms", 0.0));
    if (n.value("quarantined", false)) {
      std::printf("  QUARANTINED, counts again in %s: %s",
                  FormatDurationMs(n.value("quarantine_left_ms", int64_t{0})).c_str(),
                  n.value("quarantine_reason", "").c_str());
    }
    std::printf("\n");
  }
  std::printf("locks   %zu held through this agent\n", all.size());
  for (const auto& l : all) {
    // A detached lease: the pid is its creator's, and nothing renews it.
    std::printf("  %-32s %-22s pid %-7d held %lld ms, valid %lld ms%s, %d waiting\n",
                l.value("resource", "").c_str(), KindOf(l).c_str(), l.value("pid", -1),
                static_cast<long long>(l.value("held_ms", 0)),
                static_cast<long long>(l.value("validity_ms", 0)),
                l.value("detached", false) ? ", detached (pid: its creator)"
                : l.value("renew", false)  ? ", renewing"
                                           : "",
                l.value("waiters", 0));
  }
  return healthy ? 0 : kExitUnavailable;
}

}  // namespace lw::cli
