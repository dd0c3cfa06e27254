// `lockwarden lock RESOURCE -- CMD...`: hold a renewed lock while a command runs.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "cli/commands.h"
#include "client/client.h"

namespace lw::cli {
namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &b, 1);
}

void InstallForwarding() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

// Sets `name` to value, or removes it: never pass on an outer lock's variable as ours.
void SetOrUnset(const char* name, const std::optional<int64_t>& value) {
  if (value) {
    setenv(name, std::to_string(*value).c_str(), 1);
  } else {
    unsetenv(name);
  }
}

// What the command learns of its hold besides the resource and token.
struct GrantExtras {
  std::optional<int64_t> fence;
  std::optional<int64_t> permit;  // a semaphore's: which permit (0..K-1)
};

pid_t Spawn(const LockArgs& a, const std::string& token, const GrantExtras& extras) {
  const pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) setpgid(pid, pid);  // also done in the child; whichever runs first wins
    return pid;
  }
  setpgid(0, 0);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) signal(sig, SIG_DFL);
  setenv("LOCKWARDEN_RESOURCE", a.resource.c_str(), 1);
  setenv("LOCKWARDEN_TOKEN", token.c_str(), 1);
  SetOrUnset("LOCKWARDEN_FENCE", extras.fence);
  SetOrUnset("LOCKWARDEN_PERMIT", extras.permit);
  std::vector<char*> argv;
  for (const auto& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "lockwarden: cannot run %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int AcquireFailureExit(const LockArgs& a, const nlohmann::json& reply) {
  const std::string code = reply.value("error", "internal");
  std::fprintf(stderr, "lockwarden: could not lock \"%s\": %s: %s\n", a.resource.c_str(),
               code.c_str(), reply.value("message", "").c_str());
  return ExitCodeOfError(code, a.conflict_exit_code);
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

// Watches the child, the agent connection and forwarded signals until the child exits.
// Returns the child's wait status; sets *lost when the lock was lost meanwhile.
int Supervise(const LockArgs& a, client::Client& c, pid_t child, bool* lost) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool agent_gone = false;
  for (;;) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child) {
      if (pidfd >= 0) close(pidfd);
      return status;
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      kill(-child, SIGKILL);
      kill_at.reset();
    }
    pollfd fds[3] = {{agent_gone ? -1 : c.fd(), POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0},
                     {pidfd, POLLIN, 0}};
    const int timeout = pidfd >= 0 && !kill_at ? -1 : 20;
    if (poll(fds, 3, timeout) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      unsigned char sig;
      while (read(g_signal_pipe[0], &sig, 1) == 1) kill(-child, sig);
    }
    if (!agent_gone && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      std::string why;
      try {
        while (auto ev = c.NextEvent(std::chrono::milliseconds(0))) {
          if (ev->value("event", "") == "lost" && ev->value("resource", "") == a.resource) {
            why = ev->value("reason", "lost");
          }
        }
      } catch (const client::ClientError& e) {
        agent_gone = true;
        why = std::string("connection to the agent lost (") + e.what() + "); renewal stopped";
      }
      if (!why.empty() && !*lost) {
        *lost = true;
        std::fprintf(stderr, "lockwarden: lock \"%s\" was lost: %s; terminating the command\n",
                     a.resource.c_str(), why.c_str());
        kill(-child, SIGTERM);
        kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.kill_grace_ms);
      }
    }
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

}  // namespace

int ExitCodeOfError(const std::string& code, int conflict_exit_code) {
  if (code == "timeout") return conflict_exit_code;
  if (code == "not_held") return kExitLost;
  if (code == "bad_request" || code == "forbidden" || code == "too_many" ||
      code == "kind_mismatch") {
    return kExitUsage;
  }
  return kExitUnavailable;  // no_quorum, shutting_down, internal
}

int RunLock(const LockArgs& a) {
  std::optional<client::Client> c;
  nlohmann::json reply;
  try {
    c.emplace(a.socket_path);
    reply = c->Acquire(a.resource, a.ttl_ms, a.wait_ms, {a.permits, a.shared}, /*renew=*/true,
                       std::chrono::milliseconds(a.wait_ms + 30'000), a.fence);
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: %s\n", e.what());
    return kExitUnavailable;
  }
  if (!reply.value("ok", false)) return AcquireFailureExit(a, reply);
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
  const int status = Supervise(a, *c, child, &lost);
  if (lost) return kExitLost;
  try {
    auto rel = c->Release(a.resource, token);
    if (!rel.value("ok", false)) {
      std::fprintf(stderr, "lockwarden: release of \"%s\": %s\n", a.resource.c_str(),
                   rel.value("message", "").c_str());
    } else if (a.verbose) {
      std::fprintf(stderr, "lockwarden: released \"%s\"\n", a.resource.c_str());
    }
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: release: %s (the lock expires with its ttl)\n", e.what());
  }
  return ExitCodeOf(status);
}

}  // namespace lw::cli
