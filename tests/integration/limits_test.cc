// The client limits, access rules and socket permissions of issue 6 against a real agent on
// real masters: each limit refuses with too_many (and is counted), and the client that hit it,
// and every other client, keeps being served.

#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::limits {
namespace {

using lw::client::Client;
using lw::client::ClientError;
using nlohmann::json;

class LimitsTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{3};

  static std::string Code(const json& reply) {
    return reply.value("error", "");
  }
  // True once the agent closed `c` (a read hits EOF), within the deadline.
  static bool ClosedByAgent(Client& c, milliseconds deadline) {
    try {
      const auto end = SteadyClock::now() + deadline;
      while (SteadyClock::now() < end) {
        if (!c.ReadLine(milliseconds(100))) continue;  // a pushed line: keep reading
      }
      return false;
    } catch (const ClientError&) {
      return true;
    }
  }
  static double Refusals(const AgentProcess& agent, const std::string& limit) {
    return MetricNow(agent.admin_port(), "lockwarden_limit_refusals_total", {{"limit", limit}});
  }
};

TEST_F(LimitsTest, ConnectionsBeyondTheLimitGetOneLineAndAreClosed) {
  AgentProcess agent(cluster_, {"--max-connections", "3"});
  std::vector<Client> open;
  for (int i = 0; i < 3; ++i) {
    open.emplace_back(agent.socket_path());
    ASSERT_TRUE(open.back().Health().value("ok", false));
  }
  Client extra(agent.socket_path());
  const auto line = extra.ReadLine(milliseconds(15'000));
  ASSERT_TRUE(line.has_value());
  const json refusal = json::parse(*line);
  EXPECT_EQ(Code(refusal), "too_many") << refusal;
  EXPECT_NE(refusal["message"].get<std::string>().find("max_connections"),
            std::string::npos);
  EXPECT_TRUE(ClosedByAgent(extra, milliseconds(15'000)));
  EXPECT_EQ(Refusals(agent, "connections"), 1);

  // The sessions already open were not touched, and a freed slot is usable again.
  for (Client& c : open) EXPECT_TRUE(c.Health().value("ok", false));
  open.pop_back();
  ASSERT_TRUE(Eventually(
      [&] {
        try {
          Client again(agent.socket_path());
          return again.Call({{"op", "health"}}, milliseconds(5'000)).value("ok", false);
        } catch (const ClientError&) {
          return false;  // the slot is not freed yet: the agent closed us
        }
      },
      milliseconds(15'000)));
}

TEST_F(LimitsTest, AConnectStormWithinTheLimitIsNeverRefusedByTheBacklog) {
  // The agent accepts one connection per loop turn; while it is stopped none at all. 600
  // clients connecting then (more than a backlog of 511 holds) must all be queued, not refused
  // with EAGAIN, and served once it runs again.
  int somaxconn = 0;
  if (FILE* f = std::fopen("/proc/sys/net/core/somaxconn", "r")) {
    if (std::fscanf(f, "%d", &somaxconn) != 1) somaxconn = 0;
    std::fclose(f);
  }
  if (somaxconn < 600) {
    GTEST_SKIP() << "net.core.somaxconn is " << somaxconn
                 << ": the kernel caps every listen backlog below this storm";
  }
  AgentProcess agent(cluster_);
  ASSERT_EQ(kill(agent.pid(), SIGSTOP), 0);
  std::vector<int> fds;
  int refused = 0;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", agent.socket_path().c_str());
  for (int i = 0; i < 600; ++i) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) ++refused;
    fds.push_back(fd);
  }
  ASSERT_EQ(kill(agent.pid(), SIGCONT), 0);
  EXPECT_EQ(refused, 0) << "connections refused while the agent was stopped";
  for (int fd : fds) close(fd);
  Client after(agent.socket_path());
  EXPECT_TRUE(after.Ping().value("ok", false));
}

TEST_F(LimitsTest, UnansweredRequestsPerSessionAreBounded) {
  AgentProcess agent(cluster_, {"--max-inflight-per-session", "4"});
  Client holder(agent.socket_path());
  ASSERT_TRUE(holder.Acquire("busy", 30'000, 0).value("ok", false));

  // Six acquires of the held resource, pipelined: four wait (in flight), two are refused now.
  Client pipeliner(agent.socket_path());
  std::string batch;
  for (int i = 1; i <= 6; ++i) {
    batch += json{{"op", "acquire"}, {"id", i}, {"resource", "busy"}, {"ttl_ms", 5'000},
                  {"wait_ms", 1'000}}.dump() + "\n";
  }
  pipeliner.SendRaw(batch);
  std::vector<json> early;
  for (int i = 0; i < 2; ++i) {
    auto line = pipeliner.ReadLine(milliseconds(5'000));
    ASSERT_TRUE(line.has_value());
    early.push_back(json::parse(*line));
  }
  EXPECT_EQ(early[0]["id"], 5);
  EXPECT_EQ(early[1]["id"], 6);
  for (const json& r : early) EXPECT_EQ(Code(r), "too_many") << r;
  EXPECT_EQ(Refusals(agent, "inflight"), 2);

  // Once the waiters are answered (their wait runs out), the session may send again.
  for (int i = 1; i <= 4; ++i) {
    auto line = pipeliner.ReadLine(milliseconds(10'000));
    ASSERT_TRUE(line.has_value());
    const json reply = json::parse(*line);
    EXPECT_EQ(reply["id"], i);
    EXPECT_EQ(Code(reply), "timeout") << reply;
  }
  EXPECT_TRUE(pipeliner.Health().value("ok", false));
}

TEST_F(LimitsTest, LocksPerSessionCountHeldAndQueued) {
  AgentProcess agent(cluster_, {"--max-locks-per-session", "2"});
  Client c(agent.socket_path());
  const json a = c.Acquire("a", 30'000, 0);
  ASSERT_TRUE(a.value("ok", false)) << a;
  ASSERT_TRUE(c.Acquire("b", 30'000, 0).value("ok", false));
  const json third = c.Acquire("c", 30'000, 0);
  EXPECT_EQ(Code(third), "too_many") << third;
  EXPECT_EQ(Refusals(agent, "locks_per_session"), 1);
  // Another session is not affected.
  Client other(agent.socket_path());
  EXPECT_TRUE(other.Acquire("c", 30'000, 0).value("ok", false));
  ASSERT_TRUE(c.Release("a", a["token"]).value("ok", false));
  EXPECT_TRUE(c.Acquire("d", 30'000, 0).value("ok", false));
}

TEST_F(LimitsTest, WaitersPerResourceAreBounded) {
  AgentProcess agent(cluster_, {"--max-waiters-per-resource", "2"});
  Client holder(agent.socket_path());
  ASSERT_TRUE(holder.Acquire("hot", 30'000, 0).value("ok", false));
  Client w1(agent.socket_path()), w2(agent.socket_path()), w3(agent.socket_path());
  w1.SendRaw(json{{"op", "acquire"}, {"id", 1}, {"resource", "hot"}, {"wait_ms", 20'000}}.dump() +
             "\n");
  w2.SendRaw(json{{"op", "acquire"}, {"id", 1}, {"resource", "hot"}, {"wait_ms", 20'000}}.dump() +
             "\n");
  // Both are queued once the waiters gauge says so (an event in the agent, read over HTTP).
  ASSERT_TRUE(Eventually([&] { return MetricNow(agent.admin_port(), "lockwarden_waiters") == 2; },
                         milliseconds(15'000)));
  const json refused = w3.Acquire("hot", 5'000, 10'000);
  EXPECT_EQ(Code(refused), "too_many") << refused;
  EXPECT_NE(refused["message"].get<std::string>().find("max_waiters_per_resource"),
            std::string::npos);
  EXPECT_EQ(Refusals(agent, "waiters_per_resource"), 1);
  // Other resources are not affected.
  EXPECT_TRUE(w3.Acquire("cold", 5'000, 0).value("ok", false));
}

TEST_F(LimitsTest, IdleSessionsAreClosedButHoldersAndWaitersAreNot) {
  AgentProcess agent(cluster_, {"--idle-timeout-ms", "1000"});
  Client holder(agent.socket_path());
  ASSERT_TRUE(holder.Acquire("kept", 30'000, 0, /*renew=*/true).value("ok", false));
  Client waiter(agent.socket_path());
  waiter.SendRaw(json{{"op", "acquire"}, {"id", 1}, {"resource", "kept"},
                      {"wait_ms", 60'000}}.dump() + "\n");
  Client idle(agent.socket_path());
  // Its last byte reaches the agent after this: it is closed no sooner than a second later.
  const auto start = SteadyClock::now();
  ASSERT_TRUE(idle.Health().value("ok", false));
  // The idle one is closed after about a second of silence...
  EXPECT_TRUE(ClosedByAgent(idle, milliseconds(15'000)));
  EXPECT_GE(MsSince(start), 900);
  EXPECT_GE(Refusals(agent, "idle_timeout"), 1);
  // ...the holder and the waiter, silent just as long, are still served.
  EXPECT_TRUE(holder.Health().value("ok", false));
  EXPECT_EQ(holder.Held()["locks"].size(), 1u);
  EXPECT_FALSE(waiter.ReadLine(milliseconds(100)).has_value());  // still waiting, not closed
}

TEST_F(LimitsTest, AReaderThatDoesNotReadIsPausedAndLosesNothing) {
  AgentProcess agent(cluster_, {"--max-unsent-bytes", "65536"});
  Client flooder(agent.socket_path());
  // Replies to `health` are ~300 bytes: 20,000 of them are far beyond what the agent will
  // buffer for a reader that does not read (and than the socket buffers hold).
  constexpr int kRequests = 20'000;
  std::string batch;
  for (int i = 1; i <= kRequests; ++i) {
    batch += json{{"op", "health"}, {"id", i}}.dump() + "\n";
  }
  std::thread writer([&] { flooder.SendRaw(batch); });  // blocks once the agent stops reading
  ASSERT_TRUE(Eventually(
      [&] { return MetricNow(agent.admin_port(), "lockwarden_sessions_paused") == 1; },
      milliseconds(10'000)));
  // Meanwhile another client is served.
  Client other(agent.socket_path());
  EXPECT_TRUE(other.Acquire("x", 5'000, 0).value("ok", false));
  // Reading everything: every request is answered, in order, none lost.
  int expected = 1;
  while (expected <= kRequests) {
    auto line = flooder.ReadLine(milliseconds(10'000));
    ASSERT_TRUE(line.has_value()) << "reply " << expected << " never came";
    const json reply = json::parse(*line);
    ASSERT_EQ(reply["id"], expected) << reply;
    ++expected;
  }
  writer.join();
  EXPECT_TRUE(Eventually(
      [&] { return MetricNow(agent.admin_port(), "lockwarden_sessions_paused") == 0; },
      milliseconds(5'000)));
}

TEST_F(LimitsTest, TheSocketGetsTheConfiguredModeOwnerAndGroup) {
  const std::string dir = MakeTempDir("lw_sock_");
  const std::string path = dir + "/sub/agent.sock";  // the agent creates sub/
  AgentProcess agent(cluster_, {"--socket", path, "--socket-mode", "0620", "--socket-group",
                                "nogroup"});
  struct stat st{};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0620u);
  const group* nogroup = getgrnam("nogroup");
  ASSERT_NE(nogroup, nullptr);
  EXPECT_EQ(st.st_gid, nogroup->gr_gid);
  ASSERT_EQ(stat((dir + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  EXPECT_EQ(st.st_gid, nogroup->gr_gid);
  std::filesystem::remove_all(dir);
}

TEST_F(LimitsTest, AnUnknownSocketGroupOrAccessUserIsAConfigurationError) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--socket-group", "no-such-group-here"},
        std::vector<std::string>{"--access", "user:no-such-user-here *"}}) {
    // A socket path of this run only: refused before it is created, but a fixed path would be
    // shared with every other run on the box.
    const std::string dir = MakeTempDir("lw_cfg_");
    std::vector<std::string> argv = {LockwardenBinary(), "serve", "--master", cluster_.url(0),
                                      "--socket", dir + "/never.sock", "--admin-listen", "off"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = dir + "/out.log";
    const pid_t pid = SpawnTestProcess(argv, log);
    EXPECT_EQ(WaitChild(pid, milliseconds(20'000)), 64) << FileTail(log);
    EXPECT_NE(FileTail(log).find("no-such-"), std::string::npos) << FileTail(log);
    std::filesystem::remove_all(dir);
  }
}

// Runs `lockwarden lock` as another user/group (setpriv, util-linux) against the agent: its
// exit status says whether the lock was granted (0) or refused (non-zero).
int LockAs(const AgentProcess& agent, const std::vector<std::string>& ids,
           const std::string& resource, std::string* output) {
  std::vector<std::string> argv = {"setpriv"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  for (const std::string& a : {LockwardenBinary(), std::string("lock"), std::string("--socket"),
                               agent.socket_path(), std::string("--wait"), std::string("0s"),
                               resource, std::string("--"), std::string("true")}) {
    argv.push_back(a);
  }
  const std::string log = MakeTempDir("lw_as_") + "/out.log";
  const pid_t pid = SpawnTestProcess(argv, log);
  const int code = WaitChild(pid, milliseconds(10'000));
  *output = FileTail(log);
  return code;
}

TEST_F(LimitsTest, AccessRulesDecideByUidGroupAndSupplementaryGroup) {
  const group* nogroup = getgrnam("nogroup");
  ASSERT_NE(nogroup, nullptr);
  AgentProcess agent(cluster_, {"--socket-mode", "0666", "--access", "user:root ops/",
                                "--access", "group:nogroup shared/ public/"});
  // The fixture's dir is 0700: let the other users reach the socket (its mode is 0666).
  chmod(agent.dir().c_str(), 0755);

  Client root(agent.socket_path());
  EXPECT_TRUE(root.Acquire("ops/deploy", 5'000, 0).value("ok", false));
  const json refused = root.Acquire("shared/x", 5'000, 0);
  EXPECT_EQ(Code(refused), "forbidden") << refused;
  EXPECT_NE(refused["message"].get<std::string>().find("uid 0"), std::string::npos);
  // Several at once: every one must be allowed; the refusal names the one that is not, and
  // nothing is taken.
  const json several = root.Call({{"op", "acquire"}, {"resources", {"ops/a", "shared/y"}}});
  EXPECT_EQ(Code(several), "forbidden") << several;
  EXPECT_NE(several["message"].get<std::string>().find("\"shared/y\""), std::string::npos);
  EXPECT_TRUE(Client(agent.socket_path()).Acquire("ops/a", 5'000, 0).value("ok", false));

  std::string out;
  const std::string gid = std::to_string(nogroup->gr_gid);
  // Primary group nogroup.
  EXPECT_EQ(LockAs(agent, {"--reuid=65534", "--regid=" + gid, "--clear-groups"}, "shared/a", &out),
            0)
      << out;
  EXPECT_NE(LockAs(agent, {"--reuid=65534", "--regid=" + gid, "--clear-groups"}, "ops/a", &out), 0);
  EXPECT_NE(out.find("forbidden"), std::string::npos) << out;
  // nogroup only as a supplementary group (SO_PEERGROUPS).
  EXPECT_EQ(LockAs(agent, {"--reuid=4321", "--regid=4321", "--groups=" + gid}, "public/b", &out),
            0)
      << out;
  EXPECT_NE(LockAs(agent, {"--reuid=4321", "--regid=4321", "--clear-groups"}, "public/b", &out),
            0);
  EXPECT_GE(MetricNow(agent.admin_port(), "lockwarden_access_denied_total"), 3);
}

}  // namespace
}  // namespace lw::test::limits
