#pragma once
// Test fixture: the real lockwarden agent as a child process, serving a socket in its own temp
// dir against real masters, its stdout and stderr captured in <dir>/agent.log. Not thread-safe.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "support/redis_cluster.h"

namespace lw::test {

// Path of the lockwarden binary under test: the LOCKWARDEN_BINARY variable when set (the
// sanitizer stages point this build's tests at a sanitized agent), else the build's own agent.
std::string LockwardenBinary();

class AgentProcess {
 public:
  // When the constructor considers the agent ready (see WaitReady).
  enum class Readiness {
    kAllMasters,  // health answers ok:true and every configured master is up (the usual case:
                  // a test that expects its writes on every master must not race the handshakes)
    kQuorum,      // health answers ok:true and at least quorum masters are up
    kSocket,  // health answers ok:true, whatever the masters (for no-quorum tests)
  };

  // Runs `lockwarden serve --socket <dir>/agent.sock (unless extra_args has --socket)
  // --master <url>... --log-level debug
  // --restart-quarantine false --node-timeout-ms 500 --min-ttl-ms 1000
  // --admin-listen 127.0.0.1:<free port> <extra_args>` (without those flags of ours when
  // extra_args has them, the node timeout and min ttl when it has either: the fixture's masters
  // are all fresh, and restart quarantine would keep them out of quorum for max_ttl; the
  // default 50 ms node timeout is missed whenever a loaded box holds the agent up that long)
  // against every master of the cluster, then WaitReady(30 s). When the agent exits because
  // another process took the admin port between our pick and its bind, it is started again on
  // a fresh port (a few times).
  // The agent gets the test's environment without LOCKWARDEN_* variables (SpawnTestProcess).
  // Throws std::runtime_error with the agent's log tail if it cannot start or does not become
  // ready (the process is killed and its dir removed by the throw).
  explicit AgentProcess(const RedisCluster& cluster, std::vector<std::string> extra_args = {},
                        Readiness readiness = Readiness::kAllMasters);
  // Same with an explicit list of master URLs, e.g. including masters that were never started.
  explicit AgentProcess(std::vector<std::string> master_urls,
                        std::vector<std::string> extra_args = {},
                        Readiness readiness = Readiness::kQuorum);
  // Same, with `extra_env` ("NAME=value" each, e.g. NOTIFY_SOCKET for the systemd test, or a
  // LOCKWARDEN_* setting) added to the environment the agent inherits from the test.
  AgentProcess(std::vector<std::string> master_urls, std::vector<std::string> extra_args,
               Readiness readiness, std::vector<std::string> extra_env);
  // SIGTERM, up to 3 s for a clean exit, then SIGKILL; reaps the process and removes the dir.
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  const std::string& socket_path() const { return socket_path_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  // Port of the admin HTTP listener the fixture chose, or 0 if extra_args set it.
  int admin_port() const { return admin_port_; }

  // Polls until `deadline` from now: connect a client to the socket and ask for health. True
  // once the agent is ready in the sense of the constructor's Readiness (all masters: every
  // configured master up; quorum: the "quorum" field of the reply, or n/2+1 of the configured
  // masters if absent). False on deadline or if the agent exited (its status is kept for
  // WaitExit).
  bool WaitReady(std::chrono::milliseconds deadline);

  // Sends sig to the agent (no-op once it has been reaped).
  void Signal(int sig);
  // Waits up to `deadline` for the agent to exit and reaps it. Returns its exit code, or
  // 128 + signal number if a signal ended it, or -1 if it is still running at the deadline.
  // Once reaped, further calls return the same status at once.
  int WaitExit(std::chrono::milliseconds deadline);
  // Everything the agent has written to stdout and stderr so far.
  std::string Log() const;
  // A new client connection (a new session) to the agent; throws lw::client::ClientError.
  lw::client::Client Connect() const;

 private:
  // Reaps the agent if it has exited, recording its status; true if it has.
  bool ReapIfExited();
  void Shutdown() noexcept;

  std::vector<std::string> master_urls_;
  Readiness readiness_;
  std::string dir_;
  std::string socket_path_;
  std::string log_path_;
  pid_t pid_ = -1;
  int admin_port_ = 0;
  int exit_status_ = -1;  // valid once reaped_
  bool reaped_ = false;
};

// An agent whose admin listener is `host:<a port that was free a moment ago>` (`--admin-listen`
// ahead of extra_args), that port stored in *port: started again on a fresh port, a few times,
// when another process took that one before the agent could bind it.
std::unique_ptr<AgentProcess> AgentOnFreePort(const RedisCluster& cluster, const std::string& host,
                                              std::vector<std::string> extra_args, int* port);

}  // namespace lw::test
