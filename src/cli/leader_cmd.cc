// `lockwarden leader NAME [--watch] [--json]`: who leads an election, and its changes.

#include <time.h>

#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "client/client.h"

namespace lw::cli {
namespace {

using nlohmann::json;

// "2024-05-01T10:00:00.123Z" (UTC) for Unix ms.
std::string IsoTime(int64_t unix_ms) {
  const time_t seconds = static_cast<time_t>(unix_ms / 1000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", text, static_cast<int>(unix_ms % 1000));
  return out;
}

// One line: `jobs: host-a:8080 (term 7; agent 1f.., host web-1, pid 4242, since ...)` or
// `jobs: no leader (after term 7)`.
std::string TextLine(const std::string& name, const json& leader, int64_t term, bool missed) {
  std::string line = name + ": ";
  if (leader.is_object()) {
    line += leader.value("value", "") + " (term " + std::to_string(leader.value("term", 0)) +
            "; agent " + leader.value("agent", "") + ", host " + leader.value("host", "") +
            ", pid " + std::to_string(leader.value("pid", -1)) + ", since " +
            IsoTime(leader.value("since", int64_t{0})) + ")";
  } else {
    line += "no leader";
    if (term > 0) line += " (after term " + std::to_string(term) + ")";
  }
  if (missed) line += " [changes may have been missed]";
  return line;
}

void Print(const std::string& name, const json& leader, int64_t term, bool missed,
           bool as_json, bool with_event_fields) {
  std::string line;
  if (as_json) {
    nlohmann::ordered_json out = {{"name", name}, {"leader", leader}};
    if (with_event_fields) {
      out["term"] = term;
      out["missed"] = missed;
    }
    line = out.dump();
  } else {
    line = TextLine(name, leader, term, missed);
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int Refused(const std::string& name, const json& reply) {
  const std::string code = reply.value("error", "internal");
  std::fprintf(stderr, "lockwarden: leader of \"%s\": %s: %s\n", name.c_str(), code.c_str(),
               reply.value("message", "").c_str());
  return code == "bad_request" || code == "too_many" ? kExitUsage : kExitUnavailable;
}

}  // namespace

int RunLeader(const std::string& socket_path, const std::string& name, bool as_json, bool watch) {
  try {
    client::Client c(socket_path);
    const json reply = watch ? c.Observe(name) : c.Leader(name);
    if (!reply.value("ok", false)) return Refused(name, reply);
    const json leader = reply.value("leader", json(nullptr));
    const int64_t term = leader.is_object() ? leader.value("term", int64_t{0}) : 0;
    Print(name, leader, term, false, as_json, watch);
    if (!watch) return leader.is_object() ? kExitLeader : kExitNoLeader;
    for (;;) {
      auto event = c.NextEvent(std::chrono::hours(24));
      if (!event || event->value("event", "") != "leader" || event->value("name", "") != name) {
        continue;
      }
      Print(name, event->value("leader", json(nullptr)), event->value("term", int64_t{0}),
            event->value("missed", false), as_json, true);
    }
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: %s\n", e.what());
    return kExitUnavailable;
  }
}

}  // namespace lw::cli
