// The clients of clients/ (Python, Node, Go, shell) against the real agent and 5 real
// redis-server masters: each language's own test script runs with LOCKWARDEN_SOCKET pointing at
// the agent. A test that needs the masters changed prints `@@lw <action>` on stdout and reads
// the answer on stdin; this harness does it (kills a majority of masters, deletes every key
// under a held lock, ...) and answers `ok [value]` (clients/README.md#tests).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::clients {
namespace {

// LOCKWARDEN_CLIENTS_DIR runs another checkout's clients (e.g. a work tree's) with this build.
const std::string kClients = getenv("LOCKWARDEN_CLIENTS_DIR") != nullptr
                                 ? getenv("LOCKWARDEN_CLIENTS_DIR")
                                 : std::string(LOCKWARDEN_SOURCE_DIR) + "/clients";
// A hang bound, far above what a script takes (10-30 s here: the client's install and build, then
// its tests), under ctest's 300 s per test.
constexpr milliseconds kScriptDeadline{240'000};
// What every script must have asked for: proof that its no_quorum, lost and resume tests really
// ran.
const std::set<std::string> kRequiredActions = {"count", "pttl", "flush", "kill-majority",
                                                "restore", "restart-agent"};

// A client test script as a child process: stdin and stdout+stderr on pipes, in its own process
// group (killed as a whole at the end, so no socat or lockwarden lock it started survives).
class Script {
 public:
  // Runs `env NAME=value... argv...` (execvp) from directory `cwd`.
  Script(const std::vector<std::string>& env, const std::vector<std::string>& argv,
         const std::string& cwd) {
    int in[2];
    int out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    std::vector<std::string> args = {"env"};
    args.insert(args.end(), env.begin(), env.end());
    args.insert(args.end(), argv.begin(), argv.end());
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      close_range(3, ~0U, 0);
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) signal(sig, SIG_DFL);
      if (chdir(cwd.c_str()) != 0) _exit(126);
      execvp(cargs[0], cargs.data());
      _exit(127);
    }
    setpgid(pid_, pid_);  // also from here, so the group exists before we may signal it
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    exited_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));  // readable once it exits
    if (exited_ < 0) throw std::runtime_error("pidfd_open");
  }

  ~Script() {
    kill(-pid_, SIGKILL);
    if (!reaped_) WaitChild(pid_, milliseconds(5'000));
    close(to_child_);
    close(from_child_);
    close(exited_);
  }

  // The next line of output, or nullopt once the script has exited and its output is read
  // (a process it left behind may hold the pipe open), at EOF, or when the deadline passes.
  std::optional<std::string> ReadLine(SteadyClock::time_point deadline) {
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        output_ += line + "\n";
        return line;
      }
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
      if (left <= 0) return std::nullopt;
      pollfd p[2] = {{from_child_, POLLIN, 0}, {exited_, POLLIN, 0}};
      if (poll(p, 2, static_cast<int>(left)) <= 0) continue;
      if ((p[0].revents & (POLLIN | POLLHUP)) == 0) {  // exited, and nothing left to read
        output_ += buffer_;
        buffer_.clear();
        return std::nullopt;
      }
      char buf[4096];
      const ssize_t n = read(from_child_, buf, sizeof buf);
      if (n <= 0) {
        output_ += buffer_;
        buffer_.clear();
        return std::nullopt;
      }
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  void WriteLine(const std::string& line) {
    const std::string data = line + "\n";
    (void)!write(to_child_, data.data(), data.size());  // SIGPIPE is ignored by the fixture
  }

  // Exit code once the child has exited (after EOF), -1 if still running at the deadline.
  int Wait(milliseconds deadline) {
    const int code = WaitChild(pid_, deadline);
    reaped_ = code != -1;
    return code;
  }

  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_child_ = -1;
  int from_child_ = -1;
  int exited_ = -1;  // pidfd of the script
  std::string buffer_;
  std::string output_;
};

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The tests clients/README.md's coverage table names for one column (a language), by kind: the
// backticked names in that column of the table after the line "<!-- backed-by -->".
std::vector<std::pair<std::string, std::string>> BackingTests(const std::string& column) {
  std::ifstream in(kClients + "/README.md");
  std::string line;
  while (std::getline(in, line) && line != "<!-- backed-by -->") {
  }
  auto cells = [](const std::string& row) {
    std::vector<std::string> out;
    std::istringstream fields(row);
    std::string cell;
    std::getline(fields, cell, '|');  // before the first bar
    while (std::getline(fields, cell, '|')) out.push_back(cell);
    return out;
  };
  std::vector<std::pair<std::string, std::string>> tests;
  size_t at = SIZE_MAX;
  while (std::getline(in, line) && line.rfind('|', 0) == 0) {
    const auto row = cells(line);
    if (at == SIZE_MAX) {  // the header
      for (size_t i = 0; i < row.size(); ++i) {
        if (row[i].find(" " + column + " ") != std::string::npos) at = i;
      }
      if (at == SIZE_MAX) return {};
      continue;
    }
    if (row.size() <= at || row[0].find("---") != std::string::npos) continue;
    for (size_t open = row[at].find('`'); open != std::string::npos;) {
      const size_t close = row[at].find('`', open + 1);
      if (close == std::string::npos) break;
      const auto kind = row[0].substr(row[0].find_first_not_of(' '));
      tests.emplace_back(kind.substr(0, kind.find_last_not_of(' ') + 1),
                         row[at].substr(open + 1, close - open - 1));
      open = row[at].find('`', close + 1);
    }
  }
  return tests;
}

class ClientsTest : public ::testing::Test {
 protected:
  void SetUp() override { signal(SIGPIPE, SIG_IGN); }
  void TearDown() override {
    if (HasFailure()) std::cout << "--- output of the client tests ---\n" << output_;
    agent_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Runs a client test script to its end, answering its `@@lw` requests; returns its exit code
  // (-1 if it did not finish within kScriptDeadline). Its output goes to output_.
  int Run(const std::vector<std::string>& argv, const std::string& cwd,
          std::vector<std::string> env = {}) {
    env.push_back("LOCKWARDEN_SOCKET=" + socket_);
    env.push_back("LWTEST_CONTROL=stdio");
    // A scratch directory outside the source tree (virtualenvs, build output, caches), deleted
    // at the end.
    env.push_back("LWTEST_WORKDIR=" + dir_);
    Script script(env, argv, cwd);
    const auto deadline = SteadyClock::now() + kScriptDeadline;
    while (auto line = script.ReadLine(deadline)) {
      // Anywhere in the line: the start of a line on stderr may come before it.
      if (const auto at = line->find("@@lw "); at != std::string::npos) {
        script.WriteLine(Act(line->substr(at + 5)));
      }
    }
    const int code = script.Wait(milliseconds(5'000));
    output_ += script.output();
    return code;
  }

  // Does what a script asked for; returns the answer line.
  std::string Act(const std::string& request) {
    std::istringstream in(request);
    std::string action;
    std::string arg;
    in >> action >> arg;
    actions_.insert(action);
    if (action == "count") return "ok " + std::to_string(cluster_.CountWithKey(KeyOf(arg)));
    if (action == "pttl") {  // the smallest remaining ttl of the lock's key on any master
      int64_t least = INT64_MAX;
      for (int i = 0; i < cluster_.size(); ++i)
        least = std::min(least, cluster_.Pttl(i, KeyOf(arg)));
      return "ok " + std::to_string(least);
    }
    if (action == "flush") {  // every lock key vanishes: renewals find their locks gone
      cluster_.FlushAll();
      return "ok";
    }
    if (action == "kill-majority") {
      for (int i : {0, 1, 2}) cluster_.Kill(i);
      return "ok";
    }
    if (action == "restore") {  // the killed masters back (empty), and the agent sees them up
      for (int i : {0, 1, 2}) cluster_.Restart(i);
      return agent_->WaitReady(milliseconds(10'000)) ? "ok" : "error masters not up again";
    }
    if (action == "restart-agent") {  // kill -9, then a new run on the same socket, ready
      agent_->Signal(SIGKILL);
      if (agent_->WaitExit(milliseconds(10'000)) != 128 + SIGKILL) return "error agent not killed";
      agent_.reset();
      agent_ = StartAgent();
      return "ok";
    }
    return "error unknown action " + action;
  }

  // Every test clients/README.md's coverage table names in `column` passed: a line of the
  // runner's output has its name (not followed by more of a name) and the runner's pass mark
  // (anywhere; with a leading '^', where the line starts after its indentation).
  void ExpectCoveragePassed(const std::string& column, std::string pass_mark) {
    const bool at_start = !pass_mark.empty() && pass_mark[0] == '^';
    if (at_start) pass_mark.erase(0, 1);
    const auto tests = BackingTests(column);
    EXPECT_FALSE(tests.empty()) << "clients/README.md names no test for " << column;
    for (const auto& [kind, name] : tests) {
      bool passed = false;
      std::istringstream lines(output_);
      for (std::string line; !passed && std::getline(lines, line);) {
        const auto at = line.find(name);
        const auto after = at == std::string::npos ? 0 : at + name.size();
        const auto mark = line.find(pass_mark);
        const bool marked = mark != std::string::npos &&
                            (!at_start || line.find_first_not_of(" \t") == mark);
        passed = at != std::string::npos && marked &&
                 (after == line.size() || !(isalnum(line[after]) || line[after] == '_'));
      }
      EXPECT_TRUE(passed) << column << ": " << name << " (" << kind
                          << ") is named in clients/README.md but did not pass";
    }
  }

  void ExpectEveryAction() {
    for (const auto& a : kRequiredActions) {
      EXPECT_TRUE(actions_.count(a)) << "the script never asked for " << a;
    }
  }

  // The agent on the harness's socket (a run after `restart-agent` serves the same one). A
  // short reconnect backoff: masters restarted by `restore` count again within ~0.2 s.
  std::unique_ptr<AgentProcess> StartAgent() {
    return std::make_unique<AgentProcess>(
        cluster_, std::vector<std::string>{"--socket", socket_, "--reconnect-max-backoff-ms", "200"});
  }

  RedisCluster cluster_{5};
  std::string dir_ = MakeTempDir("lw-clients-");
  std::string socket_ = dir_ + "/agent.sock";
  std::unique_ptr<AgentProcess> agent_ = StartAgent();
  std::set<std::string> actions_;
  std::string output_;
};

// Each client's clients/<language>/test.sh runs that language's own test runner.
TEST_F(ClientsTest, Python) {
  EXPECT_EQ(Run({"bash", "test.sh"}, kClients + "/python"), 0);
  EXPECT_NE(output_.find("Ran 59 tests"), std::string::npos);
  EXPECT_EQ(output_.find("skipped"), std::string::npos);
  // unittest -v: "test_x (test_sync.SyncTest.test_x) ... ok"
  ExpectCoveragePassed("Python", "... ok");
  ExpectCoveragePassed("asyncio", "... ok");
  ExpectEveryAction();
}

TEST_F(ClientsTest, Node) {
  EXPECT_EQ(Run({"bash", "test.sh"}, kClients + "/node"), 0);
  EXPECT_NE(output_.find("\n# pass 33\n"), std::string::npos);
  EXPECT_NE(output_.find("\n# skipped 0\n"), std::string::npos);
  ExpectCoveragePassed("Node", "^ok ");  // TAP: "ok 3 - NAME", "not ok" is a failure
  ExpectEveryAction();
}

TEST_F(ClientsTest, Go) {
  EXPECT_EQ(Run({"bash", "test.sh"}, kClients + "/go"), 0);
  EXPECT_EQ(Count(output_, "--- PASS"), 31);
  EXPECT_EQ(output_.find("--- SKIP"), std::string::npos);
  ExpectCoveragePassed("Go", "--- PASS: ");
  ExpectEveryAction();
}

TEST_F(ClientsTest, Java) {
  // clients/java/test.sh builds the jar with javac and with Maven (offline, Debian's repository)
  // and runs the JUnit 5 suite with Debian's console launcher.
  EXPECT_EQ(Run({"bash", "test.sh"}, kClients + "/java"), 0);
  EXPECT_NE(output_.find(" 44 tests successful "), std::string::npos);
  EXPECT_NE(output_.find(" 0 tests failed "), std::string::npos);
  EXPECT_NE(output_.find(" 0 tests skipped "), std::string::npos);
  EXPECT_NE(output_.find(" 0 tests aborted "), std::string::npos);
  ExpectCoveragePassed("Java", "[OK]");  // the tree's ASCII theme: "+-- NAME() [OK]"
  ExpectEveryAction();
}

TEST_F(ClientsTest, Shell) {
  const std::string bin = LockwardenBinary().substr(0, LockwardenBinary().rfind('/'));
  const char* path = getenv("PATH");
  EXPECT_EQ(Run({"bash", "test.sh"}, kClients + "/shell",
                {"PATH=" + bin + ":" + (path != nullptr ? path : "/usr/bin:/bin")}),
            0);
  EXPECT_EQ(Count(output_, "\nok   test_"), 14);
  EXPECT_NE(output_.find("0 test(s) failed"), std::string::npos);
  ExpectCoveragePassed("shell", "^ok   ");
  ExpectEveryAction();
}

}  // namespace
}  // namespace lw::test::clients
