// The `lockwarden lock` command, how the client subcommands find the agent and report its
// quorum, and the agent's own lifecycle (SIGTERM, socket file).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "state_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class CliTest : public ::testing::Test {
 protected:
  pid_t Lock(std::vector<std::string> args) {
    std::vector<std::string> argv = {LockwardenBinary(), "lock", "--socket",
                                     agent_.socket_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return SpawnTestProcess(argv, out_path_);
  }
  std::string Output() const { return ReadFile(out_path_); }
  // `lockwarden lock ARGS RESOURCE -- sh -c ...`: says "started <permit>" into fifo, then
  // holds until the file `go` exists. Its output goes to out.
  pid_t HoldUntilGo(std::vector<std::string> args, const std::string& resource,
                    const std::string& fifo, const std::string& out) {
    std::vector<std::string> argv = {LockwardenBinary(), "lock", "--socket", agent_.socket_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {resource, "--", "sh", "-c",
                             "echo \"started $LOCKWARDEN_PERMIT\" > " + fifo + "; while [ ! -e " +
                                 go_path_ + " ]; do sleep 0.02; done"});
    return SpawnTestProcess(argv, out);
  }
  // `lockwarden status` (text, or --json parsed into a string) after it exits 0.
  std::string Status(const std::vector<std::string>& extra = {}) {
    const std::string out = agent_.dir() + "/status.out";
    std::vector<std::string> argv = {LockwardenBinary(), "status", "--socket",
                                     agent_.socket_path()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const pid_t pid = SpawnTestProcess(argv, out);
    EXPECT_EQ(WaitChild(pid, milliseconds(15'000)), 0) << ReadFile(out);
    return ReadFile(out);
  }

  // `lockwarden ARGS` (extra_env added to its environment) run to its end: its exit code and
  // its stdout and stderr.
  std::pair<int, std::string> Run(const std::vector<std::string>& args,
                                  const std::vector<std::string>& extra_env = {}) {
    const std::string out = agent_.dir() + "/run.out";
    std::remove(out.c_str());
    std::vector<std::string> argv = {LockwardenBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const int code = WaitChild(SpawnTestProcess(argv, out, extra_env), milliseconds(30'000));
    return {code, ReadFile(out)};
  }
  // Masters up and out of restart quarantine, as the agent's health says.
  int UsableMasters() {
    const json health = agent_.Connect().Health();
    int usable = 0;
    for (const auto& n : health["nodes"]) usable += n["up"] == true && n["quarantined"] == false;
    return usable;
  }

  RedisCluster cluster_{5};
  AgentProcess agent_{cluster_};
  const std::string socket_ = agent_.socket_path();
  std::string out_path_ = agent_.dir() + "/lock.out";
  std::string go_path_ = agent_.dir() + "/go";
};

TEST_F(CliTest, RunsTheCommandUnderTheLockAndPassesItsExitCode) {
  Fifo fifo(agent_.dir() + "/fifo");
  const std::string go = agent_.dir() + "/go";
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
  const pid_t pid = Lock({"job:1", "--", "sh", "-c",
                          "echo \"$LOCKWARDEN_RESOURCE $LOCKWARDEN_TOKEN\" > " + fifo.path() +
                              "; read x < " + go + "; exit 7"});
  const std::string line = fifo.ReadLine(milliseconds(15'000));
  ASSERT_EQ(line.substr(0, 6), "job:1 ") << Output();
  const std::string token = line.substr(6);
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("job:1"), token, 5), 5);
  std::ofstream(go) << "go\n";  // lets the command finish
  EXPECT_EQ(WaitChild(pid, milliseconds(15'000)), 7) << Output();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("job:1")), 0);
}

TEST_F(CliTest, NotAcquiredInTimeExitsWithTheConflictCode) {
  auto holder = agent_.Connect();
  // Held for far longer than the two commands below can take, however slow the box.
  ASSERT_TRUE(holder.Acquire("busy", 60'000, 0).value("ok", false));
  const pid_t pid = Lock({"--wait", "100ms", "busy", "--", "true"});
  EXPECT_EQ(WaitChild(pid, milliseconds(15'000)), 75) << Output();
  EXPECT_NE(Output().find("timeout"), std::string::npos) << Output();
  const pid_t pid2 = Lock({"--wait", "100ms", "-E", "3", "busy", "--", "true"});
  EXPECT_EQ(WaitChild(pid2, milliseconds(15'000)), 3) << Output();
}

TEST_F(CliTest, LostLockTerminatesTheCommandsProcessGroup) {
  Fifo fifo(agent_.dir() + "/fifo");
  const pid_t pid = Lock({"--ttl", "1s", "--kill-grace", "2s", "lost:job", "--", "sh", "-c",
                          "trap 'echo TERM > " + fifo.path() + "; exit 0' TERM; echo started > " +
                              fifo.path() + "; while :; do sleep 0.05; done"});
  ASSERT_EQ(fifo.ReadLine(milliseconds(15'000)), "started") << Output();
  for (int i : {0, 1, 2}) cluster_.Stop(i);
  // Lost once its 1 s validity runs out; the deadline is only there to end a failing test.
  EXPECT_EQ(fifo.ReadLine(milliseconds(20'000)), "TERM") << Output();
  EXPECT_EQ(WaitChild(pid, milliseconds(15'000)), 72) << Output();
  EXPECT_NE(Output().find("was lost"), std::string::npos) << Output();
  for (int i : {0, 1, 2}) cluster_.Cont(i);
}

TEST_F(CliTest, StatusShowsMastersQuorumAndLocksWithTheirHolder) {
  auto holder = agent_.Connect();
  ASSERT_TRUE(holder.Acquire("shown", 30'000, 0, /*renew=*/true).value("ok", false));
  const std::string out = agent_.dir() + "/status.out";
  const pid_t pid = SpawnTestProcess(
      {LockwardenBinary(), "status", "--json", "--socket", agent_.socket_path()}, out);
  ASSERT_EQ(WaitChild(pid, milliseconds(15'000)), 0) << ReadFile(out);
  const json s = json::parse(ReadFile(out));
  EXPECT_EQ(s["quorum"], 3);
  EXPECT_EQ(s["masters_up"], 5);
  ASSERT_EQ(s["locks"].size(), 1u);
  EXPECT_EQ(s["locks"][0]["resource"], "shown");
  EXPECT_EQ(s["locks"][0]["pid"], getpid());  // the holder is this test process
  EXPECT_EQ(s["locks"][0]["renew"], true);
  EXPECT_FALSE(s["locks"][0].contains("token"));
}

TEST_F(CliTest, PermitsLetKCommandsHoldAtOnceAndTheNextTimesOut) {
  Fifo fifo(agent_.dir() + "/fifo");
  const std::string out1 = agent_.dir() + "/p1.out", out2 = agent_.dir() + "/p2.out";
  const pid_t p1 = HoldUntilGo({"--permits", "2"}, "pool", fifo.path(), out1);
  const pid_t p2 = HoldUntilGo({"--permits", "2"}, "pool", fifo.path(), out2);
  std::set<std::string> started = {fifo.ReadLine(milliseconds(15'000)),
                                   fifo.ReadLine(milliseconds(15'000))};
  EXPECT_EQ(started, (std::set<std::string>{"started 0", "started 1"}))
      << ReadFile(out1) << ReadFile(out2);

  const json s = json::parse(Status({"--json"}));
  ASSERT_EQ(s["locks"].size(), 2u) << s.dump();
  for (const auto& l : s["locks"]) {
    EXPECT_EQ(l["mode"], "permit") << l.dump();
    EXPECT_EQ(l["permits"], 2) << l.dump();
    EXPECT_EQ(l["holders"], 2) << l.dump();
  }
  EXPECT_NE(Status().find("2 of 2"), std::string::npos) << Status();

  const pid_t third = Lock({"--wait", "0s", "--permits", "2", "pool", "--", "true"});
  EXPECT_EQ(WaitChild(third, milliseconds(15'000)), 75) << Output();
  EXPECT_NE(Output().find("timeout"), std::string::npos) << Output();
  std::ofstream(go_path_) << "go\n";
  EXPECT_EQ(WaitChild(p1, milliseconds(15'000)), 0) << ReadFile(out1);
  EXPECT_EQ(WaitChild(p2, milliseconds(15'000)), 0) << ReadFile(out2);
}

TEST_F(CliTest, SharedHoldsAreHeldAtOnceAndKeepAnExclusiveOneOut) {
  Fifo fifo(agent_.dir() + "/fifo");
  const std::string out1 = agent_.dir() + "/r1.out", out2 = agent_.dir() + "/r2.out";
  const pid_t r1 = HoldUntilGo({"--shared"}, "cfg", fifo.path(), out1);
  const pid_t r2 = HoldUntilGo({"--shared"}, "cfg", fifo.path(), out2);
  EXPECT_EQ(fifo.ReadLine(milliseconds(15'000)), "started ") << ReadFile(out1) << ReadFile(out2);
  EXPECT_EQ(fifo.ReadLine(milliseconds(15'000)), "started ") << ReadFile(out1) << ReadFile(out2);
  EXPECT_NE(Status().find("shared (2 readers)"), std::string::npos) << Status();

  const pid_t writer = Lock({"--wait", "0s", "cfg", "--", "true"});
  EXPECT_EQ(WaitChild(writer, milliseconds(15'000)), 75) << Output();
  std::ofstream(go_path_) << "go\n";
  EXPECT_EQ(WaitChild(r1, milliseconds(15'000)), 0) << ReadFile(out1);
  EXPECT_EQ(WaitChild(r2, milliseconds(15'000)), 0) << ReadFile(out2);
}

TEST_F(CliTest, PermitsWithSharedOrOutOfRangeIsAUsageError) {
  const pid_t both = Lock({"--permits", "2", "--shared", "pool", "--", "true"});
  EXPECT_EQ(WaitChild(both, milliseconds(15'000)), 64) << Output();
  EXPECT_NE(Output().find("--permits and --shared cannot go together"), std::string::npos)
      << Output();
  for (const char* k : {"0", "1025"}) {
    const pid_t bad = Lock({"--permits", k, "pool", "--", "true"});
    EXPECT_EQ(WaitChild(bad, milliseconds(15'000)), 64) << k << ": " << Output();
  }
  EXPECT_EQ(agent_.Connect().Call({{"op", "locks"}})["locks"].size(), 0u) << "nothing was held";
}

TEST_F(CliTest, StatusNamesTheQuorumStateAsTheStateApiDoes) {
  cluster_.Kill(4);
  const json state = StateWhen(
      agent_, [](const json& s) { return s["quorum"]["up"] == 4; }, milliseconds(15'000));
  ASSERT_EQ(state["quorum"]["state"], "at_risk") << state["quorum"].dump();
  ASSERT_TRUE(Eventually([&] { return UsableMasters() == 4; }, milliseconds(15'000)));
  const json s = json::parse(Status({"--json"}));
  EXPECT_EQ(s["quorum_state"], state["quorum"]["state"]) << s.dump();
  EXPECT_EQ(s["quorum_margin"], state["quorum"]["margin"]) << s.dump();
  EXPECT_THAT(Status(), HasSubstr("masters 4 up of 5, quorum 3: at_risk, margin 1 ("));
}

TEST_F(CliTest, LockAndElectWithoutAQuorumSayAtOnceThatTheyWaitForOne) {
  for (int i : {0, 1, 2}) cluster_.Kill(i);
  ASSERT_TRUE(Eventually([&] { return UsableMasters() == 2; }, milliseconds(15'000)));
  const auto [status_code, status] = Run({"status", "--socket", socket_});
  EXPECT_EQ(status_code, 69) << status;
  EXPECT_THAT(status, HasSubstr("quorum 3: lost, margin -1 ("));

  // --wait bounds the wait for a quorum too.
  const auto [lock_code, lock] =
      Run({"lock", "--socket", socket_, "--wait", "1s", "demo:q", "--", "true"});
  EXPECT_EQ(lock_code, 69) << lock;
  EXPECT_THAT(lock, HasSubstr("waiting for a quorum of masters to lock \"demo:q\" (2 of 5 "
                              "masters up, 2 usable, quorum 3): up to "));
  const auto [elect_code, elect] =
      Run({"elect", "--socket", socket_, "--value", "v", "--wait", "1s", "jobs", "--", "true"});
  EXPECT_EQ(elect_code, 69) << elect;
  EXPECT_THAT(elect, HasSubstr("waiting for a quorum of masters to lead \"jobs\" ("));

  // Said while the wait goes on, not when it ends; the lock is taken once a quorum is back.
  Fifo fifo(agent_.dir() + "/fifo");
  const pid_t waiting =
      Lock({"--wait", "5m", "demo:q", "--", "sh", "-c", "echo ran > " + fifo.path()});
  EXPECT_TRUE(Eventually([&] { return Output().find("waiting for a quorum") != std::string::npos; },
                         milliseconds(30'000)))
      << Output();
  EXPECT_EQ(WaitChild(waiting, milliseconds(0)), -1) << "no longer waiting: " << Output();
  for (int i : {0, 1, 2}) cluster_.Restart(i);
  EXPECT_EQ(fifo.ReadLine(milliseconds(60'000)), "ran") << Output();
  EXPECT_EQ(WaitChild(waiting, milliseconds(15'000)), 0) << Output();
}

TEST_F(CliTest, EverythingAfterTheResourceIsTheCommand) {
  const auto [flag_code, flag] =
      Run({"lock", "--socket", socket_, "demo:x", "echo", "--ttl", "5s"});
  EXPECT_EQ(flag_code, 0) << flag;
  EXPECT_EQ(flag, "--ttl 5s\n");
  const auto [dash_code, dash] =
      Run({"lock", "--socket", socket_, "--wait", "30s", "demo:x", "echo", "-n", "hello"});
  EXPECT_EQ(dash_code, 0) << dash;
  EXPECT_EQ(dash, "hello");
  const auto [sep_code, sep] =
      Run({"lock", "--socket", socket_, "demo:x", "--", "echo", "a", "--", "b"});
  EXPECT_EQ(sep_code, 0) << sep;
  EXPECT_EQ(sep, "a -- b\n");  // the `--` after the resource is lockwarden's, later ones are not
  const auto [elect_code, elect] =
      Run({"elect", "--socket", socket_, "--value", "v", "jobs", "echo", "--wait", "1s"});
  EXPECT_EQ(elect_code, 0) << elect;
  EXPECT_EQ(elect, "--wait 1s\n");
}

TEST_F(CliTest, SeveralResourcesAreHeldTogetherWhileTheCommandRuns) {
  Fifo fifo(agent_.dir() + "/fifo");
  const pid_t pid = Lock({"--fence", "set:b", "set:a", "--", "sh", "-c",
                          "echo $LOCKWARDEN_RESOURCES $LOCKWARDEN_TOKENS "
                          "\"${LOCKWARDEN_RESOURCE-none}\" > " + fifo.path() +
                              "; echo $LOCKWARDEN_FENCES > " + fifo.path() +
                              "; while [ ! -e " + go_path_ + " ]; do sleep 0.02; done; exit 3"});
  std::istringstream said(fifo.ReadLine(milliseconds(15'000)));
  std::string first, second, token_a, token_b, single;
  said >> first >> second >> token_a >> token_b >> single;
  // Taken in the canonical order, whatever order they were named in.
  EXPECT_EQ(first + " " + second, "set:a set:b") << Output();
  EXPECT_EQ(single, "none") << "the single-lock variables are removed";
  // Every master in the end (the grant needed only a quorum's answers).
  EXPECT_TRUE(Eventually(
      [&] {
        return cluster_.CountHoldingGrant(KeyOf("set:a"), token_a) == 5 &&
               cluster_.CountHoldingGrant(KeyOf("set:b"), token_b) == 5;
      },
      milliseconds(15'000)))
      << Output();
  std::istringstream fences(fifo.ReadLine(milliseconds(15'000)));
  int64_t fence_a = 0, fence_b = 0;
  fences >> fence_a >> fence_b;
  EXPECT_GT(fence_a, 0);
  EXPECT_GT(fence_b, 0);
  auto other = agent_.Connect();
  EXPECT_EQ(other.Acquire("set:a", 5'000, 0).value("error", ""), "timeout");
  EXPECT_EQ(other.Acquire("set:b", 5'000, 0).value("error", ""), "timeout");
  std::ofstream(go_path_) << "go\n";
  EXPECT_EQ(WaitChild(pid, milliseconds(15'000)), 3) << Output();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("set:a")), 0);
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("set:b")), 0);
}

TEST_F(CliTest, SeveralResourcesAreTakenAllOrNone) {
  auto holder = agent_.Connect();
  ASSERT_TRUE(holder.Acquire("set:b", 60'000, 0).value("ok", false));
  const auto [code, out] = Run({"lock", "--socket", socket_, "--wait", "200ms", "set:a", "set:b",
                                "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(code, 75) << out;
  EXPECT_EQ(out.find("ran"), std::string::npos) << out;
  EXPECT_NE(out.find("none of the 2 resources is held"), std::string::npos) << out;
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("set:a")), 0) << "set:a was let go of";
}

TEST_F(CliTest, ACommandLineThatCouldNameACommandOrAResourceIsRefused) {
  // `echo` names a command: `lock r echo -- a b` may mean either.
  const auto [code, out] = Run({"lock", "--socket", socket_, "r", "echo", "--", "a", "b"});
  EXPECT_EQ(code, 64) << out;
  EXPECT_THAT(out, HasSubstr("\"echo\" after \"r\" is a command's name"));
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("r")), 0);
  const auto [run_code, run] = Run({"lock", "--socket", socket_, "r", "--", "echo", "--", "a"});
  EXPECT_EQ(run_code, 0) << run;
  EXPECT_EQ(run, "-- a\n");
  const auto [all_code, all] = Run({"lock", "--socket", socket_, "--all", "r", "echo", "--", "sh",
                                    "-c", "echo $LOCKWARDEN_RESOURCES"});
  EXPECT_EQ(all_code, 0) << all;
  EXPECT_EQ(all, "echo r\n");
  const auto [opt_code, opt] =
      Run({"lock", "--socket", socket_, "r", "s", "--ttl", "5s", "--", "true"});
  EXPECT_EQ(opt_code, 64) << opt;
  EXPECT_THAT(opt, HasSubstr("include --ttl, an option"));
  const auto [dup_code, dup] = Run({"lock", "--socket", socket_, "r", "r", "--", "true"});
  EXPECT_EQ(dup_code, 64) << dup;
  EXPECT_THAT(dup, HasSubstr("names \"r\" twice"));
}

TEST_F(CliTest, ClientSubcommandsFindTheAgentThroughTheConfigsSocketPath) {
  const std::string cfg =
      WriteFile(agent_.dir() + "/cfg.toml", "socket_path = \"" + socket_ + "\"\n");
  const auto [status_code, status] = Run({"status", "--config", cfg});
  EXPECT_EQ(status_code, 0) << status;
  EXPECT_THAT(status, HasSubstr("agent   " + socket_ + "\n"));
  EXPECT_EQ(Run({"lock", "--config", cfg, "demo:c", "--", "true"}).first, 0);
  EXPECT_EQ(Run({"leader", "--config", cfg, "jobs"}).first, 1);  // reached: no leader
  EXPECT_EQ(Run({"status"}, {"LOCKWARDEN_CONFIG=" + cfg}).first, 0);

  // $LOCKWARDEN_SOCKET comes before the config's socket_path, and --socket before both.
  const std::string elsewhere = agent_.dir() + "/nobody.sock";
  const auto [env_code, env] = Run({"status", "--config", cfg}, {"LOCKWARDEN_SOCKET=" + elsewhere});
  EXPECT_EQ(env_code, 69) << env;
  EXPECT_THAT(env, HasSubstr(elsewhere));
  EXPECT_EQ(
      Run({"status", "--config", cfg, "--socket", socket_}, {"LOCKWARDEN_SOCKET=" + elsewhere})
          .first,
      0);
}

TEST(AgentLifecycleTest, SigtermWithReleaseOnStopReleasesEveryLockAndRemovesTheSocket) {
  RedisCluster cluster(5);
  AgentProcess agent(cluster, {"--release-on-stop", "true"});
  auto a = agent.Connect();
  auto b = agent.Connect();
  ASSERT_TRUE(a.Acquire("s1", 60'000, 0).value("ok", false));
  ASSERT_TRUE(a.Acquire("s2", 60'000, 0, /*renew=*/true).value("ok", false));
  ASSERT_TRUE(b.Acquire("s3", 60'000, 0).value("ok", false));
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.WaitExit(milliseconds(15'000)), 0) << agent.Log();
  for (const char* r : {"s1", "s2", "s3"}) EXPECT_EQ(cluster.CountWithKey(KeyOf(r)), 0) << r;
  struct stat st{};
  EXPECT_NE(stat(agent.socket_path().c_str(), &st), 0) << "socket file left behind";
}

TEST(AgentLifecycleTest, StaleSocketIsReplacedButALiveAgentIsNotStolen) {
  RedisCluster cluster(3);
  AgentProcess first(cluster);
  // A second agent on the same socket must refuse to start and leave the first one working.
  // No admin listener: the default (127.0.0.1:9477) is one fixed port for every run on the box.
  const std::string out = first.dir() + "/second.out";
  std::vector<std::string> argv = {LockwardenBinary(), "serve",          "--socket",
                                   first.socket_path(), "--admin-listen", "off"};
  for (const auto& u : cluster.urls()) argv.insert(argv.end(), {"--master", u});
  const pid_t second = SpawnTestProcess(argv, out);
  EXPECT_NE(WaitChild(second, milliseconds(15'000)), 0);
  EXPECT_NE(ReadFile(out).find("already listening"), std::string::npos) << ReadFile(out);
  auto c = first.Connect();
  EXPECT_TRUE(c.Ping().value("ok", false));

  // A crashed agent leaves its socket file behind; the next one replaces it.
  first.Signal(SIGKILL);
  ASSERT_GE(first.WaitExit(milliseconds(15'000)), 0);
  struct stat st{};
  ASSERT_EQ(stat(first.socket_path().c_str(), &st), 0);
  const pid_t third = SpawnTestProcess(argv, out);
  EXPECT_TRUE(Eventually(
      [&] {
        try {
          lw::client::Client probe(first.socket_path());
          return probe.Ping().value("ok", false);
        } catch (const lw::client::ClientError&) {
          return false;
        }
      },
      milliseconds(15'000)))
      << ReadFile(out);
  kill(third, SIGTERM);
  EXPECT_EQ(WaitChild(third, milliseconds(15'000)), 0);
}

}  // namespace
}  // namespace lw::test::cli
