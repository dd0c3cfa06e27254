#include "support/agent_process.h"
#include "support/files.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#ifndef LOCKWARDEN_BINARY
#error "LOCKWARDEN_BINARY must name the agent binary (set by tests/CMakeLists.txt)"
#endif

namespace lw::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Generous: an ASan/TSan agent on a loaded 2-core box starts in well under a second, but a
// deadline that is missed only fails the test.
constexpr milliseconds kStartDeadline{30'000};
constexpr int kAdminBindAttempts = 5;
constexpr int kNodeTimeoutMs = 500;
constexpr milliseconds kTermGrace{3'000};
constexpr milliseconds kRetryPause{5};

// Translates a wait status into WaitExit's convention: exit code, or 128 + signal.
int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return status;
}

// A pidfd becomes readable when the process exits; -1 when the kernel lacks pidfd_open.
int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// Size of the file at path, 0 when it does not exist.
std::streamoff FileSize(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::streamoff>(size);
}

// The file's contents from byte `offset` on ("" when it cannot be read).
std::string ReadFrom(const std::string& path, std::streamoff offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(offset);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int QuorumOf(const nlohmann::json& health, size_t n_masters) {
  auto it = health.find("quorum");
  if (it != health.end() && it->is_number_integer()) return it->get<int>();
  return static_cast<int>(n_masters / 2 + 1);
}

}  // namespace

std::string LockwardenBinary() {
  const char* chosen = std::getenv("LOCKWARDEN_BINARY");
  return chosen != nullptr && *chosen != '\0' ? chosen : LOCKWARDEN_BINARY;
}

AgentProcess::AgentProcess(const RedisCluster& cluster, std::vector<std::string> extra_args,
                           Readiness readiness)
    : AgentProcess(cluster.urls(), std::move(extra_args), readiness) {}

AgentProcess::AgentProcess(std::vector<std::string> master_urls,
                           std::vector<std::string> extra_args, Readiness readiness)
    : AgentProcess(std::move(master_urls), std::move(extra_args), readiness, {}) {}

AgentProcess::AgentProcess(std::vector<std::string> master_urls,
                           std::vector<std::string> extra_args, Readiness readiness,
                           std::vector<std::string> extra_env)
    : master_urls_(std::move(master_urls)), readiness_(readiness) {
  dir_ = MakeTempDir("lw-agent-");
  log_path_ = dir_ + "/agent.log";
  std::vector<std::string> argv = {LockwardenBinary(), "serve"};
  // A test may place the socket itself (e.g. to check the directory the agent creates).
  const auto socket_arg = std::find(extra_args.begin(), extra_args.end(), "--socket");
  if (socket_arg != extra_args.end() && socket_arg + 1 != extra_args.end()) {
    socket_path_ = *(socket_arg + 1);
  } else {
    socket_path_ = dir_ + "/agent.sock";
    argv.insert(argv.end(), {"--socket", socket_path_});
  }
  for (const auto& url : master_urls_) {
    argv.push_back("--master");
    argv.push_back(url);
  }
  argv.push_back("--log-level");
  argv.push_back("debug");
  const auto has = [&](const char* flag) {
    return std::find(extra_args.begin(), extra_args.end(), flag) != extra_args.end();
  };
  // Fresh masters are quarantined for max_ttl; tests that want restart quarantine ask for it
  // (a flag given twice is refused).
  if (!has("--restart-quarantine")) {
    argv.push_back("--restart-quarantine");
    argv.push_back("false");
  }
  // The agent's 50 ms node timeout counts a master out when the agent itself is held up that
  // long (its timer runs before it reads the answers that came meanwhile), which a loaded
  // 2-core box under ASan/TSan does: a grant would fail with no_quorum, or take an extra
  // attempt. Tests get kNodeTimeoutMs (and the shortest ttl that allows) unless they set either.
  if (!has("--node-timeout-ms") && !has("--min-ttl-ms")) {
    argv.insert(argv.end(), {"--node-timeout-ms", std::to_string(kNodeTimeoutMs), "--min-ttl-ms",
                             std::to_string(2 * kNodeTimeoutMs)});
  }
  const bool own_admin = std::find(extra_args.begin(), extra_args.end(), "--admin-listen") ==
                         extra_args.end();
  try {
    for (int attempt = 1;; ++attempt) {
      std::vector<std::string> args = argv;
      if (own_admin) {
        // Free a moment ago; another process may take it before the agent binds it, and then
        // the agent exits saying so: try again on a fresh port.
        admin_port_ = PickFreePort();
        args.push_back("--admin-listen");
        args.push_back("127.0.0.1:" + std::to_string(admin_port_));
      }
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      const std::streamoff log_before = FileSize(log_path_);
      pid_ = SpawnTestProcess(args, log_path_, extra_env);
      if (WaitReady(kStartDeadline)) break;
      const bool port_taken =
          own_admin && reaped_ && attempt < kAdminBindAttempts &&
          ReadFrom(log_path_, log_before).find("admin_listen: cannot bind") != std::string::npos;
      if (!port_taken) {
        std::string state = reaped_ ? "exited with code " + std::to_string(exit_status_)
                                    : "not ready within " +
                                          std::to_string(kStartDeadline.count() / 1000) + " s";
        throw std::runtime_error("lockwarden agent " + state + "\n--- agent.log ---\n" +
                                 FileTail(log_path_));
      }
      pid_ = -1;
      reaped_ = false;
      exit_status_ = -1;
    }
  } catch (...) {
    Shutdown();
    throw;
  }
}

AgentProcess::~AgentProcess() { Shutdown(); }

void AgentProcess::Shutdown() noexcept {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGTERM);
    if (WaitExit(kTermGrace) < 0) {
      kill(pid_, SIGKILL);
      WaitExit(kTermGrace);
    }
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

bool AgentProcess::ReapIfExited() {
  if (reaped_) return true;
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    reaped_ = true;
    exit_status_ = ExitCode(status);
  }
  return reaped_;
}

bool AgentProcess::WaitReady(milliseconds deadline) {
  const auto end = Clock::now() + deadline;
  std::optional<lw::client::Client> client;
  while (true) {
    if (ReapIfExited()) return false;
    // The agent is a separate process: there is no event for "socket bound" or "masters
    // connected", so poll, keeping one connection once it exists.
    try {
      if (!client) client.emplace(socket_path_);
      auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
      nlohmann::json health =
          client->Call(nlohmann::json{{"op", "health"}}, std::max(left, milliseconds(50)));
      if (health.value("ok", false)) {
        if (readiness_ == Readiness::kSocket) return true;
        int up = 0;
        auto nodes = health.find("nodes");
        if (nodes != health.end() && nodes->is_array()) {
          for (const auto& n : *nodes) {
            if (n.is_object() && n.value("up", false)) ++up;
          }
        }
        const int wanted = readiness_ == Readiness::kAllMasters
                               ? static_cast<int>(master_urls_.size())
                               : QuorumOf(health, master_urls_.size());
        if (up >= wanted) return true;
      }
    } catch (const lw::client::ClientError&) {
      client.reset();  // not listening yet, or the connection broke: reconnect next round
    } catch (const nlohmann::json::exception&) {
      client.reset();  // an unexpected reply shape; treat as not ready
    }
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(kRetryPause);
  }
}

void AgentProcess::Signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(pid_, sig);
}

int AgentProcess::WaitExit(milliseconds deadline) {
  if (ReapIfExited()) return exit_status_;
  if (pid_ <= 0) return -1;
  const auto end = Clock::now() + deadline;
  int pidfd = OpenPidfd(pid_);
  while (!ReapIfExited()) {
    auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
    if (left <= milliseconds(0)) break;
    if (pidfd >= 0) {
      pollfd pfd{pidfd, POLLIN, 0};
      poll(&pfd, 1, static_cast<int>(left.count()));  // readable once the process exits
    } else {
      std::this_thread::sleep_for(std::min(left, kRetryPause));
    }
  }
  if (pidfd >= 0) close(pidfd);
  return reaped_ ? exit_status_ : -1;
}

std::string AgentProcess::Log() const { return ReadFile(log_path_); }

lw::client::Client AgentProcess::Connect() const { return lw::client::Client(socket_path_); }

std::unique_ptr<AgentProcess> AgentOnFreePort(const RedisCluster& cluster, const std::string& host,
                                              std::vector<std::string> extra_args, int* port) {
  for (int attempt = 1;; ++attempt) {
    *port = PickFreePort();
    std::vector<std::string> args = {"--admin-listen", host + ":" + std::to_string(*port)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    try {
      return std::make_unique<AgentProcess>(cluster, args);
    } catch (const std::runtime_error& e) {
      const bool port_taken =
          std::string_view(e.what()).find("admin_listen: cannot bind") != std::string_view::npos;
      if (!port_taken || attempt == kAdminBindAttempts) throw;
    }
  }
}

}  // namespace lw::test
