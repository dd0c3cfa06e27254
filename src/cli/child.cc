#include "cli/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
      code == "kind_mismatch" || code == "would_deadlock") {
    return kExitUsage;
  }
  return kExitUnavailable;  // no_quorum, shutting_down, internal
}

namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t MsUntil(SteadyClock::time_point t, SteadyClock::time_point now) {
  return std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
}

// The holds' side of Supervise: what is known of each one's validity, and their resume on a
// new connection after the one they lived on went.
class Keeper {
 public:
  Keeper(std::optional<client::Client>& c, const HoldWatch& watch) : c_(c), watch_(watch) {
    resumable_ = !watch.holds.empty();
    for (const WatchedHold& h : watch.holds) resumable_ = resumable_ && h.resumer.has_value();
    const auto now = SteadyClock::now();
    for (const WatchedHold& h : watch.holds) {
      until_.push_back(now + std::chrono::milliseconds(h.resumer ? h.resumer->valid_ms : 0));
    }
    resumed_.assign(watch.holds.size(), false);
    refresh_at_ = now + std::chrono::milliseconds(watch.refresh_ms);
  }

  int fd() const { return connected_ ? c_->fd() : -1; }

  // How long poll may sleep before Tick has something to do (-1: nothing timed).
  int PollMs(SteadyClock::time_point now) const {
    if (!resumable_) return -1;
    const auto next = connected_ ? refresh_at_ : std::min(retry_at_, ValidUntil());
    return static_cast<int>(std::clamp<int64_t>(MsUntil(next, now), 0, 1'000));
  }

  // The connection is readable (or closed): why the holds are lost, or "".
  std::string Readable() {
    std::string why;
    try {
      while (auto ev = c_->NextEvent(std::chrono::milliseconds(0))) {
        if (ev->value("event", "") != "lost") continue;
        const std::string resource = ev->value("resource", "");
        for (const WatchedHold& h : watch_.holds) {
          if (h.resource != resource) continue;
          why = ev->value("reason", "lost");
          if (watch_.holds.size() > 1) why = "\"" + resource + "\": " + why;
        }
      }
    } catch (const client::ClientError& e) {
      return Gone(e.what());
    }
    return why;
  }

  // Timed work: the validity read again, a resume tried. Why the holds are lost, or "".
  std::string Tick(SteadyClock::time_point now) {
    if (!resumable_) return "";
    if (connected_) {
      if (now < refresh_at_) return "";
      refresh_at_ = now + std::chrono::milliseconds(watch_.refresh_ms);
      try {
        const nlohmann::json held = c_->Call({{"op", "held"}}, client::Client::Ms(5'000));
        for (const auto& lock : held.value("locks", nlohmann::json::array())) {
          for (size_t i = 0; i < watch_.holds.size(); ++i) {
            const WatchedHold& h = watch_.holds[i];
            if (lock.value("resource", "") == h.resource &&
                lock.value("token", "") == h.resumer->token) {
              until_[i] = now + std::chrono::milliseconds(lock.value("validity_ms", 0));
            }
          }
        }
      } catch (const client::ClientError& e) {
        return Gone(e.what());
      }
      return Readable();  // events read while waiting for that reply are not seen by poll
    }
    if (now >= ValidUntil()) {
      return "the agent did not come back before its validity ran out (" + gone_why_ + ")";
    }
    if (now < retry_at_) return "";
    return TryResume(now);
  }

 private:
  SteadyClock::time_point ValidUntil() const {
    return until_.empty() ? SteadyClock::time_point{} : *std::min_element(until_.begin(),
                                                                          until_.end());
  }

  std::string Gone(const std::string& error) {
    connected_ = false;
    gone_why_ = "connection to the agent lost: " + error;
    const auto now = SteadyClock::now();
    if (!resumable_ || now >= ValidUntil()) return gone_why_ + "; renewal stopped";
    std::fprintf(stderr, "lockwarden: %s; resuming %s through the agent's next run (valid for "
                 "%lld ms more)\n", gone_why_.c_str(), watch_.described.c_str(),
                 static_cast<long long>(MsUntil(ValidUntil(), now)));
    Retry(now, /*first=*/true);
    return "";
  }

  void Retry(SteadyClock::time_point now, bool first = false) {
    if (first) backoff_ms_ = 50;
    retry_at_ = now + std::chrono::milliseconds(first ? 0 : backoff_ms_);
    if (!first) backoff_ms_ = std::min<int64_t>(backoff_ms_ * 2, 500);
  }

  // Resumes every hold not yet resumed on one new connection, which replaces the old one once
  // all are: a hold resumed there stays with it while the others are retried (closing it would
  // let go of that hold).
  std::string TryResume(SteadyClock::time_point now) {
    try {
      if (!fresh_) {
        fresh_.emplace(watch_.socket_path);
        resumed_.assign(watch_.holds.size(), false);
      }
      for (size_t i = 0; i < watch_.holds.size(); ++i) {
        if (resumed_[i]) continue;
        const nlohmann::json reply = watch_.holds[i].resumer->resume(*fresh_);
        if (reply.value("ok", false)) {
          resumed_[i] = true;
          until_[i] = now + std::chrono::milliseconds(reply.value("validity_ms", 0));
          continue;
        }
        const std::string code = reply.value("error", "internal");
        if (code == "not_held" || code == "bad_request" || code == "forbidden" ||
            code == "kind_mismatch") {
          return "the agent could not resume " + Named(i) + code + ": " +
                 reply.value("message", "");
        }
        Retry(now);  // the agent cannot yet (no quorum, stopping): again on this connection
        return "";
      }
    } catch (const client::ClientError&) {
      fresh_.reset();  // not up yet, or gone again: from the start on the next one
      Retry(now);
      return "";
    }
    c_.emplace(std::move(*fresh_));
    fresh_.reset();
    connected_ = true;
    refresh_at_ = now + std::chrono::milliseconds(watch_.refresh_ms);
    std::fprintf(stderr, "lockwarden: resumed %s (validity %lld ms)\n",
                 watch_.described.c_str(), static_cast<long long>(MsUntil(ValidUntil(), now)));
    return Readable();
  }

  // "\"x\": " when several holds are watched; "" for one.
  std::string Named(size_t i) const {
    return watch_.holds.size() > 1 ? "\"" + watch_.holds[i].resource + "\": " : "";
  }

  std::optional<client::Client>& c_;
  const HoldWatch& watch_;
  bool resumable_ = false;
  bool connected_ = true;
  std::string gone_why_;
  std::vector<SteadyClock::time_point> until_;  // each hold's validity, as last learnt
  std::vector<bool> resumed_;                   // on fresh_
  std::optional<client::Client> fresh_;         // the connection holds are being resumed on
  SteadyClock::time_point refresh_at_, retry_at_;
  int64_t backoff_ms_ = 50;
};

}  // namespace

int Supervise(std::optional<client::Client>& c, pid_t child, const HoldWatch& hold, bool* lost) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  std::optional<SteadyClock::time_point> kill_at;
  Keeper keeper(c, hold);
  bool watching = true;  // the hold is not lost (yet)
  for (;;) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child) {
      if (pidfd >= 0) close(pidfd);
      return status;
    }
    auto now = SteadyClock::now();
    if (kill_at && now >= *kill_at) {
      kill(-child, SIGKILL);
      kill_at.reset();
    }
    pollfd fds[3] = {{watching ? keeper.fd() : -1, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0},
                     {pidfd, POLLIN, 0}};
    int timeout = watching ? keeper.PollMs(now) : -1;
    if (pidfd < 0 || kill_at) timeout = timeout < 0 ? 20 : std::min(timeout, 20);
    if (poll(fds, 3, timeout) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      unsigned char sig;
      while (read(g_signal_pipe[0], &sig, 1) == 1) kill(-child, sig);
    }
    if (!watching) continue;
    std::string why;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) why = keeper.Readable();
    if (why.empty()) why = keeper.Tick(SteadyClock::now());
    if (!why.empty()) {
      watching = false;
      *lost = true;
      std::fprintf(stderr, "lockwarden: %s %s lost: %s; terminating the command\n",
                   hold.described.c_str(), hold.holds.size() > 1 ? "were" : "was", why.c_str());
      kill(-child, SIGTERM);
      kill_at = SteadyClock::now() + std::chrono::milliseconds(hold.kill_grace_ms);
    }
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

int64_t ValidMsLeft(const nlohmann::json& grant, std::chrono::steady_clock::time_point asked) {
  return grant.value("validity_ms", int64_t{0}) + grant.value("waited_ms", int64_t{0}) -
         std::chrono::ceil<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked)
             .count();
}

}  // namespace lw::cli
