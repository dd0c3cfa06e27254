// `lockwarden status --fleet` and `lockwarden who RESOURCE`: the fleet as the local agent's admin
// API reads it (GET /api/v1/fleet and /api/v1/fleet/who; docs/api.md has the fields).

#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/duration.h"

namespace lw::cli {
namespace {

using nlohmann::json;

// The answer of path, or the exit code after saying why there is none.
std::variant<json, int> Fetch(const AdminArgs& args, const std::string& path,
                              const std::multimap<std::string, std::string>& query) {
  auto endpoint = ResolveAdmin(args);
  if (auto* failure = std::get_if<AdminFailure>(&endpoint)) {
    std::fprintf(stderr, "lockwarden: %s\n", failure->message.c_str());
    return failure->exit_code;
  }
  auto answer = AdminGet(std::get<AdminEndpoint>(endpoint), path, query);
  if (auto* failure = std::get_if<AdminFailure>(&answer)) {
    std::fprintf(stderr, "lockwarden: %s%s\n", failure->message.c_str(),
                 failure->code.empty() ? "" : (" [" + failure->code + "]").c_str());
    return failure->exit_code;
  }
  return std::get<json>(answer);
}

std::string Dur(const json& j, const char* key) {
  const int64_t ms = j.value(key, int64_t{-1});
  return ms < 0 ? "?" : FormatDurationMs(ms);
}

// "5 of 5 masters read (quorum 3)" and a warning when fewer than a quorum answered.
void PrintRead(const json& v) {
  const size_t total = v.value("masters", json::array()).size();
  std::printf("fleet   read from %d of %zu masters (quorum %d) in %.3f s, by agent %s\n",
              v.value("masters_read", 0), total, v.value("quorum", 0),
              v.value("read_seconds", 0.0), v["self"].value("name", "?").c_str());
  for (const auto& m : v.value("masters", json::array())) {
    if (!m.value("ok", false)) {
      std::printf("  %-24s NOT READ: %s\n", m.value("master", "?").c_str(),
                  m.value("error", "").c_str());
    }
  }
  if (!v.value("complete", false)) {
    std::printf("  INCOMPLETE: fewer than a quorum of masters answered; locks may be missing\n");
  }
  if (v.value("partial", false)) {
    std::printf("  PARTIAL: the first sweep of the keys has not ended; the locks and counts are "
                "of the %llu keys walked so far only\n",
                static_cast<unsigned long long>(v.value("keys_walked", uint64_t{0})));
  } else if (v.value("reads", 1) > 1) {
    std::printf("  read in a sweep of %d reads (fleet_read_budget), %llu keys walked\n",
                v.value("reads", 1),
                static_cast<unsigned long long>(v.value("keys_walked", uint64_t{0})));
  }
}

// "agent web-1 (host h1) pid 42 uid 1000: sleep 60" ("..., detached, created by pid 42 ..." for
// a detached lease), or the gone/unknown holder.
std::string HolderText(const json& h) {
  const std::string state = h.value("state", "unknown");
  if (state == "unknown") return "an unknown writer (the value names no agent)";
  std::string text = "agent " + h.value("agent_name", "") + " (" +
                     (h.value("host", "").empty() ? "id " + h.value("agent_id", "")
                                                  : "host " + h.value("host", "")) +
                     ")";
  if (state == "gone") text = "agent " + h.value("agent_id", "") + ": HOLDER AGENT GONE";
  if (h.value("pid", -1) >= 0) {
    text += std::string(h.value("detached", false) ? ", detached, created by" : "") + " pid " +
            std::to_string(h.value("pid", -1)) + " uid " + std::to_string(h.value("uid", -1));
    if (!h.value("cmdline", "").empty()) text += ": " + h.value("cmdline", "");
  }
  return text;
}

void PrintWaiters(const json& waiters, const char* indent) {
  for (const auto& w : waiters) {
    std::printf("%swaiter agent %s pid %d, waiting %s%s%s\n", indent,
                w.value("agent_name", w.value("agent_id", "?")).c_str(), w.value("pid", -1),
                Dur(w, "waited_ms").c_str(), w.value("cmdline", "").empty() ? "" : ": ",
                w.value("cmdline", "").c_str());
  }
}

// "pid 42 on agent web-1 (host h1): cmd" for a process of the wait-for graph.
std::string ProcessText(const json& p) {
  std::string text = "pid " + std::to_string(p.value("pid", -1));
  if (p.value("actor_pid", -1) != p.value("pid", -1)) {
    text += " (inside pid " + std::to_string(p.value("actor_pid", -1)) + ")";
  }
  text += p.value("gone", false) ? " on agent " + p.value("agent_id", "") + " (AGENT GONE)"
                                 : " on agent " + p.value("agent_name", "") +
                                       (p.value("host", "").empty() ? ""
                                                                    : " (host " + p.value("host", "") + ")");
  if (!p.value("cmdline", "").empty()) text += ": " + p.value("cmdline", "");
  return text;
}

// Why the holder does not let go: what it waits for, who holds that, and on.
void PrintChain(const json& chain, const char* indent) {
  if (chain.empty()) return;
  std::printf("%s  blocked: its holder waits\n", indent);
  for (const auto& step : chain) {
    const std::string pad(static_cast<size_t>(4 + 2 * step.value("depth", 0)), ' ');
    std::printf("%s%s%s waits %s for %s, held by\n", indent, pad.c_str(),
                ProcessText(step).c_str(), Dur(step, "waited_ms").c_str(),
                step.value("waits_for", "").c_str());
    for (const auto& h : step.value("held_by", json::array())) {
      std::printf("%s%s  %s\n", indent, pad.c_str(), ProcessText(h).c_str());
    }
    if (step.value("cycle", false)) {
      std::printf("%s%s  DEADLOCK: that holder is already in this chain\n", indent, pad.c_str());
    }
  }
}

// Who waits behind the holder: each waiting process, indented by how far behind it is.
void PrintBehind(const json& behind, const char* indent) {
  if (behind.empty()) return;
  std::printf("%s  waiting behind its holder\n", indent);
  for (const auto& step : behind) {
    const std::string pad(static_cast<size_t>(4 + 2 * step.value("depth", 0)), ' ');
    std::printf("%s%s%s, waiting %s for %s%s\n", indent, pad.c_str(), ProcessText(step).c_str(),
                Dur(step, "waited_ms").c_str(), step.value("waits_for", "").c_str(),
                step.value("cycle", false) ? ": DEADLOCK, it is the holder's own chain" : "");
  }
}

// Each deadlock: the cycle, process by process, and the revoke that would end it.
void PrintDeadlocks(const json& deadlocks) {
  if (deadlocks.empty()) return;
  std::printf("DEADLOCKS %zu\n", deadlocks.size());
  for (const auto& d : deadlocks) {
    std::printf("  %d processes, the oldest waiting %s:\n", d.value("actors", 0),
                Dur(d, "oldest_wait_ms").c_str());
    for (const auto& p : d.value("cycle", json::array())) {
      const json& holds = p["holds"];
      std::printf("    %s\n      holds %s, waits %s for %s\n", ProcessText(p).c_str(),
                  holds.is_object() ? holds.value("resource", "?").c_str() : "?",
                  Dur(p, "waited_ms").c_str(), p.value("waits_for", "").c_str());
    }
    const json& proposal = d["proposal"];
    if (proposal.is_object()) {
      std::printf("    to end it, revoke %s (hold %s): %s\n",
                  proposal.value("resource", "").c_str(), proposal.value("hold_id", "").c_str(),
                  proposal.value("why", "").c_str());
    }
  }
}

// One lock row: who holds it, for how long, where, and who waits.
void PrintLock(const json& l, const char* indent) {
  const json& h = l["holder"];
  std::printf("%s%s%s\n%s  held by %s\n", indent, l.value("resource", "").c_str(),
              l.value("stuck", false) ? ("  STUCK: " + l.value("stuck_reason", "")).c_str() : "",
              indent, HolderText(h).c_str());
  std::printf("%s  held for %s, valid %s (ttl %s%s), on %zu of %zu masters%s\n", indent,
              Dur(h, "held_ms").c_str(), Dur(l, "validity_ms").c_str(), Dur(h, "ttl_ms").c_str(),
              h.value("renew", false) ? ", renewing" : "", l.value("masters", json::array()).size(),
              l.value("masters_total", size_t{0}), l.value("quorum", false) ? "" : " (NO QUORUM)");
  std::string masters;
  for (const auto& m : l.value("masters", json::array())) {
    masters += (masters.empty() ? "" : ", ") + m.get<std::string>();
  }
  if (!masters.empty()) std::printf("%s  masters %s\n", indent, masters.c_str());
  PrintChain(l.value("blocked_by", json::array()), indent);
  PrintBehind(l.value("waiting_behind", json::array()), indent);
  PrintWaiters(l.value("waiters", json::array()), (std::string(indent) + "  ").c_str());
}

void PrintAgents(const json& agents) {
  std::printf("agents  %zu\n", agents.size());
  for (const auto& a : agents) {
    std::printf("  %-20s %-20s pid %-7d v%-8s heartbeat %s ago, %llu locks, %llu waiters\n",
                a.value("name", "").c_str(), a.value("host", "").c_str(), a.value("pid", 0),
                a.value("version", "").c_str(), Dur(a, "heartbeat_age_ms").c_str(),
                static_cast<unsigned long long>(a.value("locks_total", uint64_t{0})),
                static_cast<unsigned long long>(a.value("waiters_total", uint64_t{0})));
    for (const auto& why : a.value("drift", json::array())) {
      std::printf("    DRIFT: %s\n", why.get<std::string>().c_str());
    }
  }
}

}  // namespace

int RunFleetStatus(const AdminArgs& admin, const std::string& prefix, bool json_out) {
  auto fetched = Fetch(admin, "/api/v1/fleet", {{"limit", "1000"}, {"prefix", prefix}});
  if (auto* rc = std::get_if<int>(&fetched)) return *rc;
  const json& v = std::get<json>(fetched);
  // A partial view (the first sweep under way) is short of keys as an incomplete one is.
  const int rc = v.value("complete", false) && !v.value("partial", false) ? 0 : kExitUnavailable;
  if (json_out) {
    std::printf("%s\n", v.dump(2).c_str());
    return rc;
  }
  PrintRead(v);
  PrintDeadlocks(v.value("deadlocks", json::array()));
  PrintAgents(v.value("agents", json::array()));
  const auto locks = v.value("locks", json::array());
  std::printf("locks   %zu listed of %llu held in the fleet\n", locks.size(),
              static_cast<unsigned long long>(v.value("locks_total", uint64_t{0})));
  for (const auto& l : locks) PrintLock(l, "  ");
  const auto unheld = v.value("waiting_unheld", json::array());
  if (!unheld.empty()) {
    std::printf("waiting for locks nobody holds right now\n");
    PrintWaiters(unheld, "  ");
  }
  return rc;
}

int RunWho(const AdminArgs& admin, const std::string& resource, bool json_out) {
  auto fetched = Fetch(admin, "/api/v1/fleet/who", {{"resource", resource}});
  if (auto* rc = std::get_if<int>(&fetched)) return *rc;
  const json& v = std::get<json>(fetched);
  const bool held = v.value("held", false);
  // "Not held" is only an answer when a quorum of masters said so.
  const bool whole = v.value("complete", false) && !v.value("partial", false);
  const int rc = held ? kExitHeld : whole ? kExitNotHeld : kExitUnavailable;
  if (json_out) {
    std::printf("%s\n", v.dump(2).c_str());
    return rc;
  }
  if (held) {
    PrintLock(v, "");
  } else {
    std::printf("%s\n  not held%s\n", resource.c_str(),
                rc == kExitUnavailable ? " (as far as the masters that answered tell: fewer "
                                         "than a quorum did)"
                                       : "");
    PrintWaiters(v.value("waiters", json::array()), "  ");
  }
  return rc;
}

}  // namespace lw::cli
