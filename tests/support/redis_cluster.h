#pragma once
// Test fixture: N real redis-server masters on free loopback ports, each a child process of the
// test with its own temp dir and no persistence, so a restarted master has forgotten everything.
// Tests can kill -9, SIGSTOP/SIGCONT and restart any master, and inspect keys with short-lived
// blocking hiredis connections. Not thread-safe: drive it from the test's main thread.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/files.h"  // MakeTempDir, used with every cluster

namespace lw::test {

// Process helpers shared by RedisCluster and AgentProcess.

// Starts argv[0] (looked up in PATH) as a child process that
//   - leads its own process group, so signals sent to the test's group do not reach it;
//   - is SIGKILLed by the kernel when the spawning thread dies (PR_SET_PDEATHSIG), so a crashed
//     test leaves no orphan servers — spawn from a thread that outlives the child;
//   - reads stdin from /dev/null and appends stdout and stderr to output_path;
//   - inherits no descriptor other than 0, 1 and 2 (a test's open client sockets must not be
//     kept alive by a server it spawned later);
//   - gets the test's environment without any LOCKWARDEN_* variable, plus `extra_env`
//     ("NAME=value" each, replacing a variable of the same name). The agent refuses every
//     LOCKWARDEN_* variable that is not a setting (e.g. the harness's LOCKWARDEN_TEST_OUTPUT_DIR
//     or LOCKWARDEN_SKIP), and a setting inherited by accident would change what a test
//     checks: a test that wants one passes it in extra_env.
// Returns the child's pid once exec succeeded; throws std::runtime_error when output_path cannot
// be opened, fork fails or exec fails (the failed child is reaped).
pid_t SpawnTestProcess(const std::vector<std::string>& argv, const std::string& output_path,
                       const std::vector<std::string>& extra_env = {});

// The last max_bytes of the file at path, for failure messages; "" when it cannot be read.
std::string FileTail(const std::string& path, size_t max_bytes = 4096);

// Returns a TCP port that was free on 127.0.0.1 a moment ago (bind to port 0, read, close).
// Another process may take it before the caller binds it: callers must retry on failure.
int PickFreePort();

// What a test may add to every master of a RedisCluster.
struct RedisClusterOptions {
  // Appended to every redis-server command line, e.g. {"--requirepass", "secret"}.
  std::vector<std::string> extra_args;
  // For masters that need AUTH (requirepass): every connection of the fixture itself (readiness
  // probe, Get, Set, Run, ...) sends AUTH <password> first. Empty: no AUTH.
  std::string password;
};

class RedisCluster {
 public:
  // Starts n masters and waits until each answers; throws std::runtime_error (with the log tail
  // of the master that failed) if one cannot be started within its deadline. Masters already
  // started are cleaned up by the throw.
  explicit RedisCluster(int n);
  // The same, each master started with options.extra_args (Restart too).
  RedisCluster(int n, RedisClusterOptions options);
  // Kills every master still running (SIGCONT first if stopped), reaps it, removes temp dirs.
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }
  int port(int i) const;
  std::string url(int i) const;  // "redis://127.0.0.1:<port>"
  std::vector<std::string> urls() const;
  // The master's temp dir; its log is dir(i) + "/redis.log".
  const std::string& dir(int i) const;
  // Pid of master i's most recent process, even after Kill (so a test can check it is gone);
  // -1 if it was never started.
  pid_t pid(int i) const;

  // SIGKILL and reap master i. No-op if it is not running.
  void Kill(int i);
  // SIGSTOP master i and return once it is stopped: its socket still accepts connections but
  // nothing is answered. No-op if not running or already stopped.
  void Stop(int i);
  // SIGCONT master i and return once it runs again. No-op if not stopped.
  void Cont(int i);
  // Starts master i again on the same port and dir and waits until it answers; it comes back
  // empty (no persistence). Kills it first if it is still running. The port may still be held
  // by the old process's sockets for a moment: tries again for up to 10 s. Throws
  // std::runtime_error.
  void Restart(int i);
  // True while master i's process exists (stopped counts as running; killed or exited does not).
  bool running(int i) const;

  // Inspection and setup. Each call opens a fresh connection with a 1 s connect and reply
  // timeout, so a stopped master makes the call take about 1 s.

  // Value of key on master i; nullopt when the key is missing or the master does not answer.
  std::optional<std::string> Get(int i, const std::string& key) const;
  // PTTL of key on master i: remaining ms, -1 without expiry, -2 when missing (Redis semantics),
  // kUnreachable when the master does not answer.
  static constexpr int64_t kUnreachable = -3;
  int64_t Pttl(int i, const std::string& key) const;
  // Keys of master i matching a glob pattern (SCAN MATCH, so the server is never blocked);
  // empty when the master does not answer.
  std::vector<std::string> Keys(int i, const std::string& pattern) const;
  // How many masters hold key == value / hold key at all. Only masters that are running and not
  // stopped are asked (a stopped master cannot answer; asking would cost a 1 s timeout each).
  int CountHolding(const std::string& key, const std::string& value) const;
  // How many masters hold the grant with this client token: key == "<agent id>:<token>", the
  // value an agent writes (fleet::LockValue; the agent id is 16 lowercase hex characters).
  int CountHoldingGrant(const std::string& key, const std::string& token) const;
  // The same counts once they reach `expected`, or as they stand 5 s later: a grant is answered
  // once a quorum holds it, and the other masters' copies follow. A count already there is
  // returned at once.
  int AwaitHolding(const std::string& key, const std::string& value, int expected) const;
  int AwaitHoldingGrant(const std::string& key, const std::string& token, int expected) const;
  int CountWithKey(const std::string& key) const;
  // Members of the sorted set at key on master i with their scores (ZRANGE WITHSCORES); empty
  // when missing or the master does not answer.
  std::vector<std::pair<std::string, double>> ZRange(int i, const std::string& key) const;
  // SET key value on master i, with PX px_ms when px_ms > 0 (else without expiry). For tests
  // that pre-occupy a lock key. Throws std::runtime_error when the master does not answer OK.
  void Set(int i, const std::string& key, const std::string& value, int64_t px_ms);
  // FLUSHALL on every master that is running and not stopped; throws std::runtime_error if one
  // of them fails.
  void FlushAll();
  // Empties every live master's Lua script cache (EVALSHA then answers NOSCRIPT).
  void ScriptFlush();
  // Runs a command that answers +OK (e.g. ACL SETUSER) on master i; throws std::runtime_error
  // (with the error reply, if any) otherwise.
  void Run(int i, const std::vector<std::string>& command);
  // PUBSUB NUMSUB channel on master i: its subscribers, or -1 when the master does not answer.
  int64_t NumSub(int i, const std::string& channel) const;
  // PUBLISH channel message on master i: the subscribers it reached, or -1 when the master does
  // not answer.
  int64_t Publish(int i, const std::string& channel, const std::string& message) const;

 private:
  struct Node {
    int port = 0;
    std::string dir;
    pid_t pid = -1;       // live process (not yet reaped), or -1
    pid_t last_pid = -1;  // most recent process, kept after Kill
    bool stopped = false;
  };

  const Node& node(int i) const;
  Node& node(int i);
  // Spawns redis for node i on node.port and waits until it answers. Returns false (child reaped,
  // reason in *why) if the process exited early, e.g. because its port was taken; throws
  // std::runtime_error on timeout.
  bool TryStart(Node& node, std::string* why);
  // TryStart until it succeeds: on a fresh port each time when may_change_port (a few
  // attempts), else on the same port after a short pause, for up to 10 s. Throws
  // std::runtime_error when it gives up.
  void Start(Node& node, bool may_change_port);
  // What the destructor does; also undoes a constructor that throws halfway.
  void Cleanup() noexcept;
  void OnEveryLiveMaster(const std::vector<std::string>& command);

  RedisClusterOptions options_;
  std::vector<Node> nodes_;
};

}  // namespace lw::test
