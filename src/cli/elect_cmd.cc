// `lockwarden elect --value V NAME [--] CMD...`: lead an election while a command runs.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "cli/child.h"
#include "cli/commands.h"
#include "cli/quorum_report.h"
#include "client/client.h"

namespace lw::cli {
namespace {

// Longer than any wait_ms an agent accepts (max_wait_ms is at most a day): a campaign without
// --wait is answered within the agent's max_wait_ms.
constexpr std::chrono::hours kNoWaitBound{25};

// Campaigns until elected (or refused otherwise than by the wait running out, when no --wait
// was given). The reply of the campaign that ended it; *asked: when that campaign was sent.
nlohmann::json CampaignUntilElected(const ElectArgs& a, client::Client& c,
                                    std::chrono::steady_clock::time_point* asked) {
  const auto timeout = a.wait_ms >= 0 ? std::chrono::milliseconds(a.wait_ms + 30'000)
                                      : std::chrono::milliseconds(kNoWaitBound);
  for (;;) {
    *asked = std::chrono::steady_clock::now();
    nlohmann::json reply = c.Campaign(a.name, a.value, a.ttl_ms, a.wait_ms, timeout);
    if (reply.value("ok", false) || a.wait_ms >= 0 || reply.value("error", "") != "timeout") {
      return reply;
    }
    if (a.verbose) {
      std::fprintf(stderr, "lockwarden: still not leading \"%s\"; campaigning again\n",
                   a.name.c_str());
    }
  }
}

void Resign(const ElectArgs& a, client::Client& c, const std::string& token) {
  GiveBack({"resign", "resigned from", "\"" + a.name + "\"", "the leadership"}, a.verbose,
           [&] { return c.Resign(a.name, token); });
}

// The leadership's resume through the agent's next run, by its term (docs/protocol.md#resume).
Resumer ResumerOf(const ElectArgs& a, const std::string& token, int64_t term, int64_t valid_ms) {
  Resumer r;
  r.token = token;
  r.valid_ms = valid_ms;
  r.resume = [a, token, term](client::Client& c) {
    client::Client::HoldKind leadership;
    leadership.election = true;
    return c.Resume(a.name, token, a.ttl_ms, /*renew=*/true, leadership, -1, term,
                    client::Client::Ms(5'000));
  };
  return r;
}

}  // namespace

int RunElect(const ElectArgs& a) {
  std::optional<client::Client> c;
  nlohmann::json reply;
  auto asked = std::chrono::steady_clock::now();
  try {
    c.emplace(a.socket_path);
    SayIfWaitingForQuorum(*c, "lead \"" + a.name + "\"", a.wait_ms);
    reply = CampaignUntilElected(a, *c, &asked);
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: %s\n", e.what());
    return kExitUnavailable;
  }
  if (!reply.value("ok", false)) {
    return RefusalExit("lead \"" + a.name + "\"", reply, a.conflict_exit_code);
  }
  const std::string token = reply.value("token", "");
  if (!reply.contains("term") || !reply["term"].is_number_integer()) {
    std::fprintf(stderr, "lockwarden: the agent elected us without a term; not running the "
                         "command\n");
    Resign(a, *c, token);
    return kExitUnavailable;
  }
  const std::string term = std::to_string(reply["term"].get<int64_t>());
  if (a.verbose) {
    std::fprintf(stderr, "lockwarden: leading \"%s\" (term %s, validity %lld ms, waited %lld ms)\n",
                 a.name.c_str(), term.c_str(),
                 static_cast<long long>(reply.value("validity_ms", 0)),
                 static_cast<long long>(reply.value("waited_ms", 0)));
  }
  InstallForwarding();
  // The term is the grant's fence: LOCKWARDEN_FENCE too, for what `lock --fence` feeds.
  const pid_t child = SpawnCommand(a.command, {{"LOCKWARDEN_RESOURCE", a.name},
                                               {"LOCKWARDEN_TOKEN", token},
                                               {"LOCKWARDEN_TERM", term},
                                               {"LOCKWARDEN_FENCE", term},
                                               {"LOCKWARDEN_PERMIT", std::nullopt},
                                               {"LOCKWARDEN_RESOURCES", std::nullopt},
                                               {"LOCKWARDEN_TOKENS", std::nullopt},
                                               {"LOCKWARDEN_FENCES", std::nullopt},
                                               {"LOCKWARDEN_PERMITS", std::nullopt}});
  if (child < 0) {
    std::fprintf(stderr, "lockwarden: fork failed: %s\n", std::strerror(errno));
    Resign(a, *c, token);
    return kExitUnavailable;
  }
  bool lost = false;
  const int64_t valid_ms = ValidMsLeft(reply, asked);
  const HoldWatch watch{
      .holds = {{a.name, ResumerOf(a, token, reply["term"].get<int64_t>(), valid_ms)}},
      .described = "leadership of \"" + a.name + "\"",
      .kill_grace_ms = a.kill_grace_ms,
      .socket_path = a.socket_path,
      .refresh_ms = std::max<int64_t>(100, valid_ms / 3),  // the agent renews at ttl/3
  };
  const int status = Supervise(c, child, watch, &lost);
  if (lost) return kExitLost;
  Resign(a, *c, token);
  return ExitCodeOf(status);
}

}  // namespace lw::cli
