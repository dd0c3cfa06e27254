// `lockwarden lock RESOURCE [--] CMD...`: hold a renewed lock while a command runs.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "cli/child.h"
#include "cli/commands.h"
#include "cli/quorum_report.h"
#include "client/client.h"

namespace lw::cli {
namespace {

std::optional<std::string> NumberOrNone(const std::optional<int64_t>& n) {
  if (!n) return std::nullopt;
  return std::to_string(*n);
}

// What the command learns of its hold besides the resource and token.
struct GrantExtras {
  std::optional<int64_t> fence;
  std::optional<int64_t> permit;  // a semaphore's: which permit (0..K-1)
};

pid_t Spawn(const LockArgs& a, const std::string& token, const GrantExtras& extras) {
  return SpawnCommand(a.command, {{"LOCKWARDEN_RESOURCE", a.resource},
                                  {"LOCKWARDEN_TOKEN", token},
                                  {"LOCKWARDEN_FENCE", NumberOrNone(extras.fence)},
                                  {"LOCKWARDEN_PERMIT", NumberOrNone(extras.permit)},
                                  {"LOCKWARDEN_TERM", std::nullopt}});
}

// The fence and permit of a grant; nullopt (said on stderr) when a fence was asked for and the
// grant has none.
std::optional<GrantExtras> ExtrasOf(const LockArgs& a, const nlohmann::json& reply) {
  GrantExtras extras;
  if (reply.contains("permit") && reply["permit"].is_number_integer()) {
    extras.permit = reply["permit"].get<int64_t>();
  }
  if (!a.fence) return extras;
  if (!reply.contains("fence") || !reply["fence"].is_number_integer()) {
    std::fprintf(stderr, "lockwarden: the agent granted the lock without a fence (an older "
                         "agent?); not running the command\n");
    return std::nullopt;
  }
  extras.fence = reply["fence"].get<int64_t>();
  return extras;
}

void SayAcquired(const LockArgs& a, const nlohmann::json& reply, const GrantExtras& extras) {
  std::string hold;
  if (extras.fence) hold += ", fence " + std::to_string(*extras.fence);
  if (extras.permit) {
    hold += ", permit " + std::to_string(*extras.permit) + " of " + std::to_string(a.permits);
  }
  if (reply.value("mode", "") == "shared") hold += ", shared";
  std::fprintf(stderr, "lockwarden: acquired \"%s\" (validity %lld ms, waited %lld ms%s)\n",
               a.resource.c_str(), static_cast<long long>(reply.value("validity_ms", 0)),
               static_cast<long long>(reply.value("waited_ms", 0)), hold.c_str());
}

// A hold's resume through the agent's next run: what the acquire asked and the grant answered.
Resumer ResumerOf(const LockArgs& a, const std::string& token, const GrantExtras& extras,
                  int64_t valid_ms) {
  Resumer r;
  r.socket_path = a.socket_path;
  r.token = token;
  r.valid_ms = valid_ms;
  // The agent renews at a third of the ttl: reading the validity as often keeps it current.
  r.refresh_ms = std::max<int64_t>(100, valid_ms / 3);
  r.resume = [a, token, extras](client::Client& c) {
    return c.Resume(a.resource, token, a.ttl_ms, /*renew=*/true, {a.permits, a.shared},
                    static_cast<int>(extras.permit.value_or(-1)), extras.fence.value_or(0),
                    client::Client::Ms(5'000));
  };
  return r;
}

// The acquire, waiting up to --wait in all, for a quorum of masters (said at once on stderr)
// as for another holder. When the agent goes away meanwhile (it answers
// shutting_down, or the connection ends), the wait goes on through its next run, at the back of
// the line, saying so. *asked: when the acquire that was answered was sent. Throws ClientError
// when the agent cannot be reached at first, or not again before the wait ran out.
nlohmann::json AcquireThroughRestarts(const LockArgs& a, std::optional<client::Client>& c,
                                      std::chrono::steady_clock::time_point* asked) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(a.wait_ms);
  bool reached = false;
  int64_t backoff_ms = 50;
  for (;;) {
    const int64_t left = std::max<int64_t>(
        0, std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count());
    std::string why;
    try {
      c.emplace(a.socket_path);
      const int64_t wait_said = reached ? left : a.wait_ms;  // --wait as given, at first
      reached = true;
      SayIfWaitingForQuorum(*c, "lock \"" + a.resource + "\"", wait_said);
      *asked = Clock::now();
      nlohmann::json reply =
          c->Acquire(a.resource, a.ttl_ms, left, {a.permits, a.shared}, /*renew=*/true,
                     std::chrono::milliseconds(left + 30'000), a.fence);
      if (reply.value("error", "") != "shutting_down" || left == 0) return reply;
      why = "the agent is stopping";
    } catch (const client::ClientError& e) {
      if (!reached || Clock::now() >= deadline) throw;
      why = std::string("connection to the agent lost (") + e.what() + ")";
    }
    c.reset();
    std::fprintf(stderr, "lockwarden: %s; waiting for \"%s\" again through its next run\n",
                 why.c_str(), a.resource.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 500);
  }
}

}  // namespace

int RunLock(const LockArgs& a) {
  std::optional<client::Client> c;
  nlohmann::json reply;
  auto asked = std::chrono::steady_clock::now();
  try {
    reply = AcquireThroughRestarts(a, c, &asked);
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: %s\n", e.what());
    return kExitUnavailable;
  }
  if (!reply.value("ok", false)) {
    return RefusalExit("lock \"" + a.resource + "\"", reply, a.conflict_exit_code);
  }
  const std::string token = reply.value("token", "");
  const std::optional<GrantExtras> extras = ExtrasOf(a, reply);
  if (!extras) {
    try {
      c->Release(a.resource, token);
    } catch (const client::ClientError&) {
      // the agent releases it when this connection closes
    }
    return kExitUnavailable;
  }
  if (a.verbose) SayAcquired(a, reply, *extras);
  InstallForwarding();
  const pid_t child = Spawn(a, token, *extras);
  if (child < 0) {
    std::fprintf(stderr, "lockwarden: fork failed: %s\n", std::strerror(errno));
    return kExitUnavailable;
  }
  bool lost = false;
  const int64_t valid_ms = ValidMsLeft(reply, asked);
  const int status = Supervise(c, child,
                               {a.resource, "lock \"" + a.resource + "\"", a.kill_grace_ms,
                                ResumerOf(a, token, *extras, valid_ms)},
                               &lost);
  if (lost) return kExitLost;
  GiveBack({"release", "released", "\"" + a.resource + "\"", "the lock"}, a.verbose,
           [&] { return c->Release(a.resource, token); });
  return ExitCodeOf(status);
}

}  // namespace lw::cli
