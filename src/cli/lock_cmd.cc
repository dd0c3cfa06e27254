// `lockwarden lock RESOURCE [--] CMD...`: hold a renewed lock while a command runs; `lockwarden
// lock R1 R2... -- CMD...`: hold several, taken all or none (docs/cli.md).

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

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

// One lock of the command's: its grant (for several, with the whole acquire's waited_ms, which
// its validity counts from) and what the command learns of it.
struct Held {
  std::string resource;
  nlohmann::json grant;
  GrantExtras extras;
};

std::string Joined(const std::vector<Held>& held,
                   const std::function<std::optional<std::string>(const Held&)>& part) {
  std::string out;
  for (const Held& h : held) {
    const std::optional<std::string> p = part(h);
    if (!p) return "";
    out += (out.empty() ? "" : "\n") + *p;
  }
  return out;
}

std::optional<std::string> OrNone(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

// One lock: LOCKWARDEN_RESOURCE, _TOKEN, _FENCE, _PERMIT. Several: those are removed, and
// LOCKWARDEN_RESOURCES, _TOKENS, _FENCES, _PERMITS list them one per line, in the order they
// were taken (one lock sets both).
pid_t Spawn(const LockArgs& a, const std::vector<Held>& held) {
  const bool one = held.size() == 1;
  const auto single = [&](const std::function<std::optional<std::string>(const Held&)>& part) {
    return one ? part(held.front()) : std::nullopt;
  };
  const auto resource = [](const Held& h) { return std::optional<std::string>(h.resource); };
  const auto token = [](const Held& h) {
    return std::optional<std::string>(h.grant.value("token", ""));
  };
  const auto fence = [](const Held& h) { return NumberOrNone(h.extras.fence); };
  const auto permit = [](const Held& h) { return NumberOrNone(h.extras.permit); };
  return SpawnCommand(a.command, {{"LOCKWARDEN_RESOURCE", single(resource)},
                                  {"LOCKWARDEN_TOKEN", single(token)},
                                  {"LOCKWARDEN_FENCE", single(fence)},
                                  {"LOCKWARDEN_PERMIT", single(permit)},
                                  {"LOCKWARDEN_RESOURCES", OrNone(Joined(held, resource))},
                                  {"LOCKWARDEN_TOKENS", OrNone(Joined(held, token))},
                                  {"LOCKWARDEN_FENCES", OrNone(Joined(held, fence))},
                                  {"LOCKWARDEN_PERMITS", OrNone(Joined(held, permit))},
                                  {"LOCKWARDEN_TERM", std::nullopt}});
}

// The fence and permit of a grant; nullopt (said on stderr) when a fence was asked for and the
// grant has none.
std::optional<GrantExtras> ExtrasOf(const LockArgs& a, const nlohmann::json& grant) {
  GrantExtras extras;
  if (grant.contains("permit") && grant["permit"].is_number_integer()) {
    extras.permit = grant["permit"].get<int64_t>();
  }
  if (!a.fence) return extras;
  if (!grant.contains("fence") || !grant["fence"].is_number_integer()) {
    std::fprintf(stderr, "lockwarden: the agent granted the lock without a fence (an older "
                         "agent?); not running the command\n");
    return std::nullopt;
  }
  extras.fence = grant["fence"].get<int64_t>();
  return extras;
}

// The holds of a granting reply, in the order the agent took them; empty when one lacks the
// fence asked for.
std::vector<Held> HeldOf(const LockArgs& a, const nlohmann::json& reply) {
  std::vector<Held> held;
  if (a.resources.size() == 1) {
    held.push_back({a.resources.front(), reply, {}});
  } else {
    for (nlohmann::json grant : reply.value("resources", nlohmann::json::array())) {
      grant["waited_ms"] = reply.value("waited_ms", int64_t{0});  // validity counts from there
      held.push_back({grant.value("resource", ""), std::move(grant), {}});
    }
  }
  for (Held& h : held) {
    const std::optional<GrantExtras> extras = ExtrasOf(a, h.grant);
    if (!extras) return {};
    h.extras = *extras;
  }
  return held;
}

void SayAcquired(const LockArgs& a, const Held& h) {
  std::string hold;
  if (h.extras.fence) hold += ", fence " + std::to_string(*h.extras.fence);
  if (h.extras.permit) {
    hold += ", permit " + std::to_string(*h.extras.permit) + " of " + std::to_string(a.permits);
  }
  if (h.grant.value("mode", "") == "shared") hold += ", shared";
  std::fprintf(stderr, "lockwarden: acquired \"%s\" (validity %lld ms, waited %lld ms%s)\n",
               h.resource.c_str(), static_cast<long long>(h.grant.value("validity_ms", 0)),
               static_cast<long long>(h.grant.value("waited_ms", 0)), hold.c_str());
}

// A hold's resume through the agent's next run: what the acquire asked and the grant answered.
WatchedHold WatchOf(const LockArgs& a, const Held& h, int64_t valid_ms) {
  Resumer r;
  r.token = h.grant.value("token", "");
  r.valid_ms = valid_ms;
  r.resume = [a, resource = h.resource, token = r.token, extras = h.extras](client::Client& c) {
    return c.Resume(resource, token, a.ttl_ms, /*renew=*/true, {a.permits, a.shared},
                    static_cast<int>(extras.permit.value_or(-1)), extras.fence.value_or(0),
                    client::Client::Ms(5'000));
  };
  return {h.resource, std::move(r)};
}

// `"x"`, or `"x", "y"`.
std::string Names(const LockArgs& a) {
  std::string names;
  for (const std::string& r : a.resources) names += (names.empty() ? "\"" : ", \"") + r + "\"";
  return names;
}

// `lock "x"`, or `locks "x", "y"`.
std::string Described(const LockArgs& a) {
  return (a.resources.size() == 1 ? "lock " : "locks ") + Names(a);
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
      SayIfWaitingForQuorum(*c, Described(a), wait_said);
      *asked = Clock::now();
      const auto timeout = std::chrono::milliseconds(left + 30'000);
      nlohmann::json reply =
          a.resources.size() == 1
              ? c->Acquire(a.resources.front(), a.ttl_ms, left, {a.permits, a.shared},
                           /*renew=*/true, timeout, a.fence)
              : c->AcquireAll(a.resources, a.ttl_ms, left, {a.permits, a.shared},
                              /*renew=*/true, timeout, a.fence);
      if (reply.value("error", "") != "shutting_down" || left == 0) return reply;
      why = "the agent is stopping";
    } catch (const client::ClientError& e) {
      if (!reached || Clock::now() >= deadline) throw;
      why = std::string("connection to the agent lost (") + e.what() + ")";
    }
    c.reset();
    std::fprintf(stderr, "lockwarden: %s; waiting for the %s again through its next run\n",
                 why.c_str(), Described(a).c_str());
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
    return RefusalExit("lock " + Names(a), reply, a.conflict_exit_code);
  }
  const std::vector<Held> held = HeldOf(a, reply);
  if (held.empty()) {  // a fence was asked for and not given
    c.reset();  // the agent lets go of every lock of a connection that closes
    return kExitUnavailable;
  }
  if (a.verbose) {
    for (const Held& h : held) SayAcquired(a, h);
  }
  InstallForwarding();
  const pid_t child = Spawn(a, held);
  if (child < 0) {
    std::fprintf(stderr, "lockwarden: fork failed: %s\n", std::strerror(errno));
    return kExitUnavailable;
  }
  HoldWatch watch{.holds = {}, .described = Described(a), .kill_grace_ms = a.kill_grace_ms,
                  .socket_path = a.socket_path, .refresh_ms = 0};
  int64_t least_ms = INT64_MAX;
  for (const Held& h : held) {
    const int64_t valid_ms = ValidMsLeft(h.grant, asked);
    least_ms = std::min(least_ms, valid_ms);
    watch.holds.push_back(WatchOf(a, h, valid_ms));
  }
  // The agent renews at a third of the ttl: reading the validity as often keeps it current.
  watch.refresh_ms = std::max<int64_t>(100, least_ms / 3);
  bool lost = false;
  const int status = Supervise(c, child, watch, &lost);
  if (lost) return kExitLost;
  for (const Held& h : held) {
    GiveBack({"release", "released", "\"" + h.resource + "\"", "the lock"}, a.verbose,
             [&] { return c->Release(h.resource, h.grant.value("token", "")); });
  }
  return ExitCodeOf(status);
}

}  // namespace lw::cli
