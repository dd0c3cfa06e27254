// The agent as a systemd Type=notify service (src/agent/systemd_notify.*, deploy/systemd/):
// the test plays systemd's side. It binds the Unix datagram socket systemd would, starts the
// real agent with NOTIFY_SOCKET and WATCHDOG_USEC pointing at it, and reads what the agent
// sends: READY=1 only once a quorum of masters is usable (as /readyz), WATCHDOG=1 again and
// again, STOPPING=1 on SIGTERM.

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/agent_process.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::systemd_notify {
namespace {

// The receiving end of sd_notify(3): a bound AF_UNIX datagram socket. Each datagram is one
// notification of newline-separated VAR=value lines; every line received is kept, in order.
class NotifySocket {
 public:
  NotifySocket() : dir_(MakeTempDir("lw-notify-")), path_(dir_ + "/notify.sock") {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      throw std::runtime_error("cannot bind " + path_ + ": " + std::strerror(errno));
    }
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<std::string>& lines() const { return lines_; }

  // Receives notifications until one has a line for which `wanted` holds (true), or until
  // `deadline` from now (false). Lines already received are not looked at again.
  template <typename Pred>
  bool WaitFor(Pred wanted, milliseconds deadline) {
    const auto end = SteadyClock::now() + deadline;
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(end - SteadyClock::now());
      if (left <= milliseconds(0)) return false;
      pollfd pfd{fd_, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      bool found = false;
      std::string datagram(buf, static_cast<size_t>(n));
      size_t start = 0;
      while (start <= datagram.size()) {
        size_t nl = datagram.find('\n', start);
        if (nl == std::string::npos) nl = datagram.size();
        if (nl > start) {
          lines_.push_back(datagram.substr(start, nl - start));
          found = wanted(lines_.back()) || found;  // lines() already includes it
        }
        start = nl + 1;
      }
      if (found) return true;
    }
  }
  bool WaitForLine(const std::string& line, milliseconds deadline) {
    return WaitFor([&](const std::string& l) { return l == line; }, deadline);
  }
  bool WaitForStatusContaining(const std::string& text, milliseconds deadline) {
    return WaitFor(
        [&](const std::string& l) {
          return l.rfind("STATUS=", 0) == 0 && l.find(text) != std::string::npos;
        },
        deadline);
  }
  int Count(const std::string& line) const {
    return static_cast<int>(std::count(lines_.begin(), lines_.end(), line));
  }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> lines_;
};

// WatchdogSec=200ms: the agent must ping every 100 ms, so a few pings take well under a second.
constexpr char kWatchdogUsec[] = "WATCHDOG_USEC=200000";
// For a notification the agent sends on its own: generous, it only ends a failing test.
constexpr milliseconds kNotifyDeadline{15'000};

class SystemdNotifyTest : public ::testing::Test {
 protected:
  // Starts the agent against the cluster's masters with systemd's variables, waiting only for
  // its socket to answer (the masters may be down on purpose).
  std::unique_ptr<AgentProcess> StartAgent(std::vector<std::string> extra_args = {}) {
    return std::make_unique<AgentProcess>(
        cluster_.urls(), std::move(extra_args), AgentProcess::Readiness::kSocket,
        std::vector<std::string>{"NOTIFY_SOCKET=" + notify_.path(), kWatchdogUsec});
  }

  const SteadyClock::time_point created_ = SteadyClock::now();  // before the masters start
  NotifySocket notify_;
  RedisCluster cluster_{3};
};

TEST_F(SystemdNotifyTest, ReadyOnlyWithAQuorumThenWatchdogThenStoppingOnSigterm) {
  for (int i = 0; i < cluster_.size(); ++i) cluster_.Kill(i);
  auto agent = StartAgent();

  // Masters down: the agent listens, says what it waits for, and feeds the watchdog, but is
  // not ready. Three pings after the first "waiting" status prove the loop ran on meanwhile.
  ASSERT_TRUE(notify_.WaitForStatusContaining("waiting for a quorum: 0 of 3 masters usable",
                                              kNotifyDeadline))
      << agent->Log();
  const int pings_before = notify_.Count("WATCHDOG=1");
  ASSERT_TRUE(notify_.WaitFor(
      [&](const std::string&) { return notify_.Count("WATCHDOG=1") >= pings_before + 2; },
      kNotifyDeadline));
  EXPECT_EQ(notify_.Count("READY=1"), 0);

  // One master of three: still no quorum, still not ready.
  cluster_.Restart(0);
  ASSERT_TRUE(notify_.WaitForStatusContaining("1 of 3 masters usable", kNotifyDeadline))
      << agent->Log();
  EXPECT_EQ(notify_.Count("READY=1"), 0);
  EXPECT_EQ(HttpGet(agent->admin_port(), "/readyz").status, 503);

  // The second one makes the quorum: READY=1, and /readyz agrees by then.
  cluster_.Restart(1);
  ASSERT_TRUE(notify_.WaitForLine("READY=1", kNotifyDeadline)) << agent->Log();
  const HttpResult readyz = HttpGet(agent->admin_port(), "/readyz");
  EXPECT_EQ(readyz.status, 200) << readyz.body;
  EXPECT_NE(notify_.lines().back().find("ready: 2 of 3 masters usable"), std::string::npos)
      << "the READY=1 notification carries the status line; last line: " << notify_.lines().back();

  // The watchdog goes on being fed once ready.
  const int pings_at_ready = notify_.Count("WATCHDOG=1");
  ASSERT_TRUE(notify_.WaitFor(
      [&](const std::string&) { return notify_.Count("WATCHDOG=1") >= pings_at_ready + 3; },
      kNotifyDeadline));
  EXPECT_EQ(notify_.Count("READY=1"), 1) << "READY=1 is sent once";

  agent->Signal(SIGTERM);
  ASSERT_TRUE(notify_.WaitForLine("STOPPING=1", kNotifyDeadline)) << agent->Log();
  EXPECT_EQ(agent->WaitExit(kNotifyDeadline), 0) << agent->Log();
}

TEST_F(SystemdNotifyTest, ReadyWaitsForRestartQuarantineLikeReadyz) {
  // Fresh masters with quarantine on: up at once, usable only max_ttl after their start, which
  // came after created_: READY=1 cannot come sooner than created_ + max_ttl. A 15 s max_ttl:
  // the agent (ASan/TSan on a loaded box) has started and said "quarantine" long before.
  constexpr int kMaxTtlMs = 15'000;
  auto agent = StartAgent({"--restart-quarantine", "true", "--max-ttl-ms",
                           std::to_string(kMaxTtlMs), "--default-ttl-ms", "1000"});
  ASSERT_TRUE(notify_.WaitForStatusContaining("3 in restart quarantine", kNotifyDeadline))
      << agent->Log();
  ASSERT_LT(MsSince(created_), kMaxTtlMs) << "too slow a start to see the quarantine";
  EXPECT_EQ(notify_.Count("READY=1"), 0);
  EXPECT_EQ(HttpGet(agent->admin_port(), "/readyz").status, 503);

  ASSERT_TRUE(notify_.WaitForLine("READY=1", milliseconds(2 * kMaxTtlMs))) << agent->Log();
  EXPECT_GE(MsSince(created_), kMaxTtlMs);
  EXPECT_EQ(HttpGet(agent->admin_port(), "/readyz").status, 200);
}

TEST_F(SystemdNotifyTest, NoWatchdogPingsWithoutWatchdogUsec) {
  // Only NOTIFY_SOCKET: READY=1 and STATUS, but the watchdog timer is never started.
  AgentProcess agent(cluster_.urls(), {}, AgentProcess::Readiness::kSocket,
                     {"NOTIFY_SOCKET=" + notify_.path()});
  ASSERT_TRUE(notify_.WaitForLine("READY=1", kNotifyDeadline)) << agent.Log();
  agent.Signal(SIGTERM);
  ASSERT_TRUE(notify_.WaitForLine("STOPPING=1", kNotifyDeadline)) << agent.Log();
  EXPECT_EQ(agent.WaitExit(kNotifyDeadline), 0);
  EXPECT_EQ(notify_.Count("WATCHDOG=1"), 0);
}

}  // namespace
}  // namespace lw::test::systemd_notify
