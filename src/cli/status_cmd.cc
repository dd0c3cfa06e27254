// `lockwarden status`: masters, quorum and this connection's view of the agent.

#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "cli/quorum_report.h"
#include "client/client.h"
#include "core/duration.h"
#include "core/error_code.h"

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

int ReportFailure(bool json, ErrorCode code, const std::string& message, int exit_code) {
  if (json) {
    const nlohmann::ordered_json out = {
        {"ok", false}, {"error", std::string(ErrorCodeName(code))}, {"message", message}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  std::fprintf(stderr, "lockwarden: %s\n", message.c_str());
  return exit_code;
}

int RunStatus(const std::string& socket_path, bool json) {
  nlohmann::json health, locks;
  try {
    client::Client c(socket_path);
    health = c.Health();
    locks = c.Call({{"op", "locks"}});
  } catch (const client::ClientError& e) {
    return ReportFailure(json, ErrorCode::kUnavailable, e.what(), kExitUnavailable);
  }
  const QuorumCounts quorum = QuorumOfHealth(health);
  const int exit_code = QuorumReady(quorum) ? 0 : kExitUnavailable;
  auto all = locks.value("locks", nlohmann::json::array());
  CountHolders(all);
  if (json) {
    nlohmann::json out = {{"socket", socket_path},
                          {"quorum", quorum.quorum},
                          {"masters_up", quorum.up},
                          {"masters_usable", quorum.usable},
                          {"quorum_state", std::string(QuorumStateName(QuorumStateOf(quorum)))},
                          {"quorum_margin", QuorumMargin(quorum)},
                          {"nodes", health.value("nodes", nlohmann::json::array())},
                          {"locks", all}};
    std::printf("%s\n", out.dump(2).c_str());
    return exit_code;
  }
  const auto& nodes = health["nodes"];
  const std::string quarantined =
      quorum.up > quorum.usable
          ? " (" + std::to_string(quorum.up - quorum.usable) + " in restart quarantine)"
          : "";
  std::printf("agent   %s\nmasters %d up of %d%s, quorum %d: %s\n", socket_path.c_str(), quorum.up,
              quorum.masters, quarantined.c_str(), quorum.quorum, QuorumVerdict(quorum).c_str());
  for (const auto& n : nodes) {
    const bool node_up = n.value("up", false);
    std::printf("  %-24s %-4s", n.value("addr", "?").c_str(), node_up ? "up" : "DOWN");
    if (node_up) std::printf(" rtt %.2f ms", n.value("rtt_ms", 0.0));
    const std::string tls = n.value("tls", "off");
    if (tls == "verified") std::printf("  tls");
    if (tls == "unverified") std::printf("  TLS UNVERIFIED (any certificate accepted)");
    if (!node_up && !n.value("error", "").empty()) {
      std::printf("  %s", n.value("error", "").c_str());
    }
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
  return exit_code;
}

}  // namespace lw::cli
