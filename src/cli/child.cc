#include "cli/child.h"

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

#include "cli/commands.h"

namespace lw::cli {
namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &b, 1);
}

}  // namespace

void InstallForwarding() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

pid_t SpawnCommand(const std::vector<std::string>& command, const EnvChanges& env) {
  const pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) setpgid(pid, pid);  // also done in the child; whichever runs first wins
    return pid;
  }
  setpgid(0, 0);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) signal(sig, SIG_DFL);
  for (const auto& [name, value] : env) {
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  std::vector<char*> argv;
  for (const auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
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

void GiveBack(const GiveBackWords& words, bool verbose,
              const std::function<nlohmann::json()>& send) {
  try {
    const nlohmann::json reply = send();
    if (!reply.value("ok", false)) {
      std::fprintf(stderr, "lockwarden: %s of %s: %s\n", words.op.c_str(), words.what.c_str(),
                   reply.value("message", "").c_str());
    } else if (verbose) {
      std::fprintf(stderr, "lockwarden: %s %s\n", words.done.c_str(), words.what.c_str());
    }
  } catch (const client::ClientError& e) {
    std::fprintf(stderr, "lockwarden: %s: %s (%s ends with its ttl)\n", words.op.c_str(),
                 e.what(), words.ends.c_str());
  }
}

int RefusalExit(const std::string& doing, const nlohmann::json& reply, int conflict_exit_code) {
  const std::string code = reply.value("error", "internal");
  std::fprintf(stderr, "lockwarden: could not %s: %s: %s\n", doing.c_str(), code.c_str(),
               reply.value("message", "").c_str());
  return ExitCodeOfError(code, conflict_exit_code);
}

int ExitCodeOfError(const std::string& code, int conflict_exit_code) {
  if (code == "timeout") return conflict_exit_code;
  if (code == "not_held") return kExitLost;
  if (code == "bad_request" || code == "forbidden" || code == "too_many" ||
      code == "kind_mismatch") {
    return kExitUsage;
  }
  return kExitUnavailable;  // no_quorum, shutting_down, internal
}

int Supervise(client::Client& c, pid_t child, const HoldWatch& hold, bool* lost) {
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
          if (ev->value("event", "") == "lost" && ev->value("resource", "") == hold.resource) {
            why = ev->value("reason", "lost");
          }
        }
      } catch (const client::ClientError& e) {
        agent_gone = true;
        why = std::string("connection to the agent lost (") + e.what() + "); renewal stopped";
      }
      if (!why.empty() && !*lost) {
        *lost = true;
        std::fprintf(stderr, "lockwarden: %s was lost: %s; terminating the command\n",
                     hold.described.c_str(), why.c_str());
        kill(-child, SIGTERM);
        kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(hold.kill_grace_ms);
      }
    }
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

}  // namespace lw::cli
