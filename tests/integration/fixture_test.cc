// Self-tests of the RedisCluster fixture: the other integration tests trust it to start, kill,
// freeze and restart real masters, and to leave nothing behind.

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "support/redis_cluster.h"

namespace lw::test::fixture {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// True while pid names a live process. A zombie counts as gone: an orphan reparented to a
// container init that never reaps would otherwise look alive forever.
bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

TEST(RedisClusterTest, StartsMastersOnDistinctPorts) {
  RedisCluster cluster(3);
  ASSERT_EQ(cluster.size(), 3);
  std::set<int> ports;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(cluster.running(i));
    EXPECT_GT(cluster.pid(i), 0);
    EXPECT_EQ(cluster.url(i), "redis://127.0.0.1:" + std::to_string(cluster.port(i)));
    EXPECT_TRUE(std::filesystem::is_directory(cluster.dir(i)));
    ports.insert(cluster.port(i));
  }
  EXPECT_EQ(ports.size(), 3u);
  EXPECT_EQ(cluster.urls().size(), 3u);
  EXPECT_THROW(cluster.port(3), std::out_of_range);
}

TEST(RedisClusterTest, SetGetPttlAndCounts) {
  RedisCluster cluster(3);
  cluster.Set(0, "lock:a", "tok1", 10'000);
  EXPECT_EQ(cluster.Get(0, "lock:a"), "tok1");
  EXPECT_EQ(cluster.Get(1, "lock:a"), std::nullopt);
  int64_t pttl = cluster.Pttl(0, "lock:a");
  EXPECT_GT(pttl, 9'000);
  EXPECT_LE(pttl, 10'000);
  EXPECT_EQ(cluster.Pttl(1, "lock:a"), -2);
  cluster.Set(1, "plain", "v", 0);
  EXPECT_EQ(cluster.Pttl(1, "plain"), -1);

  cluster.Set(1, "lock:a", "tok1", 10'000);
  cluster.Set(2, "lock:a", "tok2", 10'000);
  EXPECT_EQ(cluster.CountHolding("lock:a", "tok1"), 2);
  EXPECT_EQ(cluster.CountHolding("lock:a", "tok2"), 1);
  EXPECT_EQ(cluster.CountHolding("lock:a", "nope"), 0);
  EXPECT_EQ(cluster.CountWithKey("lock:a"), 3);
  EXPECT_EQ(cluster.CountWithKey("lock:b"), 0);

  for (int k = 0; k < 2500; ++k) cluster.Set(0, "bulk:" + std::to_string(k), "x", 0);
  EXPECT_EQ(cluster.Keys(0, "bulk:*").size(), 2500u);  // several SCAN rounds
  EXPECT_EQ(cluster.Keys(0, "lock:*"), std::vector<std::string>{"lock:a"});
  EXPECT_TRUE(cluster.Keys(1, "bulk:*").empty());

  cluster.FlushAll();
  EXPECT_EQ(cluster.CountWithKey("lock:a"), 0);
  EXPECT_TRUE(cluster.Keys(0, "*").empty());
}

TEST(RedisClusterTest, KillThenRestartComesBackEmptyOnSamePort) {
  RedisCluster cluster(3);
  cluster.Set(1, "lock:k", "tok", 60'000);
  const int port = cluster.port(1);
  const pid_t old_pid = cluster.pid(1);

  cluster.Kill(1);
  EXPECT_FALSE(cluster.running(1));
  EXPECT_FALSE(ProcessAlive(old_pid));
  EXPECT_EQ(cluster.Get(1, "lock:k"), std::nullopt);
  EXPECT_EQ(cluster.Pttl(1, "lock:k"), RedisCluster::kUnreachable);
  EXPECT_TRUE(cluster.Keys(1, "*").empty());
  EXPECT_THROW(cluster.Set(1, "x", "y", 0), std::runtime_error);
  EXPECT_EQ(cluster.CountWithKey("lock:k"), 0);
  cluster.Kill(1);  // no-op when already dead

  cluster.Restart(1);
  EXPECT_TRUE(cluster.running(1));
  EXPECT_EQ(cluster.port(1), port);
  EXPECT_NE(cluster.pid(1), old_pid);
  EXPECT_EQ(cluster.Get(1, "lock:k"), std::nullopt);  // no persistence: the lock is forgotten
  cluster.Set(1, "lock:k", "tok2", 60'000);
  EXPECT_EQ(cluster.Get(1, "lock:k"), "tok2");

  cluster.Restart(1);  // restart of a running master kills it first
  EXPECT_TRUE(cluster.running(1));
  EXPECT_EQ(cluster.Get(1, "lock:k"), std::nullopt);
}

TEST(RedisClusterTest, StoppedMasterTimesOutAndContRestores) {
  RedisCluster cluster(3);
  cluster.Set(2, "lock:s", "tok", 60'000);
  cluster.Stop(2);
  EXPECT_TRUE(cluster.running(2));

  auto start = Clock::now();
  EXPECT_EQ(cluster.Get(2, "lock:s"), std::nullopt);
  auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  // It really waited for a reply, and gave up at the 1 s timeout rather than hanging.
  EXPECT_GE(elapsed, milliseconds(900));
  EXPECT_LT(elapsed, milliseconds(5000));
  EXPECT_EQ(cluster.CountHolding("lock:s", "tok"), 0);  // stopped masters are skipped

  cluster.Cont(2);
  EXPECT_EQ(cluster.Get(2, "lock:s"), "tok");
  EXPECT_EQ(cluster.CountHolding("lock:s", "tok"), 1);
}

TEST(RedisClusterTest, DestructorLeavesNoProcessOrDir) {
  std::vector<pid_t> pids;
  std::vector<std::string> dirs;
  {
    RedisCluster cluster(3);
    cluster.Kill(0);
    cluster.Restart(0);
    cluster.Stop(1);  // the destructor must also end a stopped master
    for (int i = 0; i < 3; ++i) {
      pids.push_back(cluster.pid(i));
      dirs.push_back(cluster.dir(i));
    }
  }
  for (pid_t pid : pids) {
    errno = 0;
    EXPECT_EQ(kill(pid, 0), -1) << "pid " << pid;
    EXPECT_EQ(errno, ESRCH) << "pid " << pid;
  }
  for (const auto& dir : dirs) EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

// A test process that dies without running destructors must not leave servers behind.
TEST(RedisClusterTest, MastersDieWithTheTestProcess) {
  // Adopt the orphaned redis-server so we can reap it: PID 1 of a container may never do so.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  struct SubreaperOff {
    ~SubreaperOff() { prctl(PR_SET_CHILD_SUBREAPER, 0); }
  } subreaper_off;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    try {
      RedisCluster cluster(1);
      pid_t redis_pid = cluster.pid(0);
      (void)!write(fds[1], &redis_pid, sizeof redis_pid);
      (void)!write(fds[1], cluster.dir(0).data(), cluster.dir(0).size());
      raise(SIGKILL);  // die with the cluster alive: no destructors, no atexit
    } catch (...) {
    }
    _exit(1);
  }
  close(fds[1]);
  pid_t redis_pid = -1;
  ssize_t got = read(fds[0], &redis_pid, sizeof redis_pid);
  std::string dir;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) dir.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof redis_pid));
  // The kernel SIGKILLs the orphan; it is reparented to us, so reaping it proves it died.
  bool reaped = false;
  auto deadline = Clock::now() + milliseconds(15'000);
  while (!reaped && Clock::now() < deadline) {
    reaped = waitpid(redis_pid, &status, WNOHANG) == redis_pid;
    if (!reaped) std::this_thread::sleep_for(milliseconds(10));
  }
  if (dir.rfind("/tmp/lw-redis-", 0) == 0) std::filesystem::remove_all(dir);
  ASSERT_TRUE(reaped) << "orphan redis-server " << redis_pid << " still running";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

}  // namespace
}  // namespace lw::test::fixture
