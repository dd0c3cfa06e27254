// Deadlocks across the fleet with real agents, masters and `lockwarden lock` processes: two
// processes deadlocked across two agents (one of them a `lockwarden lock` nested in another's
// command) with a third process only waiting, which must not be called deadlocked; a three-actor
// cycle; a cycle through a semaphore's permits. Each is read from an agent that takes no part in
// it, through /api/v1/fleet, `lockwarden who`, `status --fleet` and the gauge; the first is ended
// by revoking the lock the view proposes, after which every process finishes.
//
// The test process itself is an actor: it holds locks through some agents, and the
// `lockwarden lock` processes it starts are part of it on an agent where it holds or waits (they
// are its children), and actors of their own elsewhere.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::deadlock {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kToken = "deadlock-test-token-0123456789abcdef";

std::vector<std::string> AgentArgs(const std::string& name, const std::string& token_path) {
  return {"--agent-name", name, "--heartbeat-ttl-ms", "4000", "--fleet-refresh-ms", "1000",
          "--admin-token-file", token_path};
}

class DeadlockTest : public ::testing::Test {
 protected:
  ~DeadlockTest() override {
    for (pid_t pid : spawned_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  // `lockwarden lock --socket S --wait 120s [more] RESOURCE -- CMD...`, a child of this process.
  pid_t Lock(const AgentProcess& agent, const std::string& resource,
             std::vector<std::string> cmd = {"true"}, std::vector<std::string> more = {}) {
    std::vector<std::string> argv = {LockwardenBinary(), "lock", "--socket", agent.socket_path(),
                                     "--wait", "120s", "--ttl", "10s"};
    argv.insert(argv.end(), more.begin(), more.end());
    argv.push_back(resource);
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    const pid_t pid = SpawnTestProcess(argv, dir_ + "/lock-" + std::to_string(spawned_.size()));
    spawned_.push_back(pid);
    return pid;
  }

  std::string Out(size_t i) const { return FileTail(dir_ + "/lock-" + std::to_string(i)); }

  // Until `resource`'s key exists on master 0 (its first holder is granted).
  void AwaitHeld(const std::string& resource) {
    ASSERT_TRUE(Eventually([&] { return cluster_.Get(0, KeyOf(resource)).has_value(); },
                           milliseconds(30'000)))
        << resource << " was never granted";
  }

  static json Fleet(const AgentProcess& agent) {
    HttpResult r = HttpGet(agent.admin_port(), "/api/v1/fleet");
    return r.status == 200 ? json::parse(r.body) : json::object();
  }

  // The view's deadlocks once it lists `n` of them.
  static json AwaitDeadlocks(const AgentProcess& agent, size_t n) {
    json found = json::array();
    Eventually(
        [&] {
          found = Fleet(agent).value("deadlocks", json::array());
          return found.size() == n;
        },
        milliseconds(40'000));
    return found;
  }

  // {agent name, actor pid} of each process of a cycle.
  static std::set<std::pair<std::string, int>> Actors(const json& deadlock) {
    std::set<std::pair<std::string, int>> out;
    for (const json& p : deadlock["cycle"]) {
      out.insert({p["agent_name"].get<std::string>(), p["actor_pid"].get<int>()});
    }
    return out;
  }

  static const json* EntryOf(const json& deadlock, const std::string& agent) {
    for (const json& p : deadlock["cycle"]) {
      if (p["agent_name"] == agent) return &p;
    }
    return nullptr;
  }

  std::pair<int, std::string> Run(const std::vector<std::string>& args) {
    const std::string out = dir_ + "/run.out";
    std::remove(out.c_str());
    std::vector<std::string> argv = {LockwardenBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const int code = WaitChild(SpawnTestProcess(argv, out), milliseconds(30'000));
    return {code, ReadFile(out)};
  }

  const int self_ = static_cast<int>(getpid());
  std::string dir_ = MakeTempDir("lw-deadlock-");
  std::string token_path_ = WriteFile(dir_ + "/token", kToken);
  std::vector<pid_t> spawned_;
  RedisCluster cluster_{3};
  AgentProcess a_{cluster_, AgentArgs("agent-a", token_path_)};
  AgentProcess b_{cluster_, AgentArgs("agent-b", token_path_)};
  AgentProcess c_{cluster_, AgentArgs("agent-c", token_path_)};
};

TEST_F(DeadlockTest, TwoProcessesAcrossTwoAgentsAreOneDeadlockAndTheProposedRevokeEndsIt) {
  // This process holds dl:2 through B.
  auto held_b = b_.Connect();
  ASSERT_TRUE(held_b.Acquire("dl:2", 10'000, 1'000, /*renew=*/true).value("ok", false));
  // `lockwarden lock dl:1 -- lockwarden lock dl:2 -- true` through A: the outer holds dl:1, the
  // nested one waits for dl:2.
  const pid_t outer = Lock(a_, "dl:1", {LockwardenBinary(), "lock", "--socket", a_.socket_path(),
                                        "--wait", "120s", "dl:2", "--", "true"});
  AwaitHeld("dl:1");
  // The nested one waits before this process does (so its wait is the older).
  ASSERT_TRUE(Eventually(
      [&] {
        const HttpResult r = HttpGet(c_.admin_port(), "/api/v1/fleet/who?resource=dl:2");
        if (r.status != 200) return false;
        for (const json& w : json::parse(r.body).value("waiters", json::array())) {
          if (w.value("agent_name", "") == "agent-a") return true;
        }
        return false;
      },
      milliseconds(30'000)));
  // This process waits for dl:1 through B (its child, so part of it there): the cycle closes.
  const pid_t closer = Lock(b_, "dl:1");
  // A third process waits for dl:1 through C, holding nothing: behind the deadlock, not in it.
  const pid_t bystander = Lock(c_, "dl:1");

  const json deadlocks = AwaitDeadlocks(c_, 1);
  ASSERT_EQ(deadlocks.size(), 1u) << Fleet(c_).dump(1);
  const json& d = deadlocks[0];
  EXPECT_EQ(d["actors"], 2);
  EXPECT_EQ(Actors(d), (std::set<std::pair<std::string, int>>{{"agent-a", outer},
                                                              {"agent-b", self_}}));
  const json* on_a = EntryOf(d, "agent-a");
  ASSERT_NE(on_a, nullptr);
  EXPECT_NE((*on_a)["pid"], outer) << "the waiting process is the nested lockwarden lock";
  EXPECT_EQ((*on_a)["waits_for"], "dl:2");
  EXPECT_EQ((*on_a)["holds"]["resource"], "dl:1");
  EXPECT_EQ((*on_a)["holds"]["pid"], outer);
  EXPECT_NE((*on_a)["cmdline"].get<std::string>().find("dl:2"), std::string::npos);
  const json* on_b = EntryOf(d, "agent-b");
  ASSERT_NE(on_b, nullptr);
  EXPECT_EQ((*on_b)["pid"], closer);
  EXPECT_EQ((*on_b)["waits_for"], "dl:1");
  EXPECT_EQ((*on_b)["holds"]["resource"], "dl:2");
  for (const json& p : d["cycle"]) EXPECT_NE(p["pid"], bystander);
  // The fleet's gauges come from its one reporter, whichever agent that is.
  EXPECT_TRUE(Eventually(
      [&] {
        double most = 0;
        for (const AgentProcess* agent : {&a_, &b_, &c_}) {
          most = std::max(most, MetricNow(agent->admin_port(), "lockwarden_fleet_deadlocks"));
        }
        return most == 1;
      },
      milliseconds(30'000)))
      << "no agent exports lockwarden_fleet_deadlocks 1";

  // dl:1's row says why its holder does not let go, back to itself.
  const json who = json::parse(HttpGet(c_.admin_port(), "/api/v1/fleet/who?resource=dl:1").body);
  ASSERT_FALSE(who["blocked_by"].empty()) << who.dump(1);
  EXPECT_EQ(who["blocked_by"][0]["waits_for"], "dl:2");
  EXPECT_TRUE(who["blocked_by"].back()["cycle"]) << who.dump(1);
  // Behind dl:1's holder: this process (through B) and the bystander, each waiting for it.
  std::set<int> behind;
  for (const json& step : who["waiting_behind"]) {
    if (step["depth"] == 0) behind.insert(step["pid"].get<int>());
  }
  EXPECT_EQ(behind, (std::set<int>{closer, bystander})) << who.dump(1);
  const auto [who_code, who_text] = Run({"who", "--socket", c_.socket_path(), "dl:1"});
  EXPECT_NE(who_text.find("DEADLOCK"), std::string::npos) << who_text;
  EXPECT_NE(who_text.find("waits"), std::string::npos) << who_text;
  const auto [status_code, status_text] = Run({"status", "--fleet", "--socket", c_.socket_path()});
  EXPECT_NE(status_text.find("DEADLOCKS 1"), std::string::npos) << status_text;
  EXPECT_NE(status_text.find("to end it, revoke dl:2"), std::string::npos) << status_text;

  // The proposal: the hold of the process that waited least (this one, through B, last to
  // wait): dl:2. Revoking it lets the nested lock through, then everyone in turn.
  const json& proposal = d["proposal"];
  ASSERT_EQ(proposal["resource"], "dl:2") << d.dump(1);
  const std::string body =
      json{{"resource", proposal["resource"]}, {"hold", proposal["hold_id"]}}.dump();
  HttpResult done = HttpPost(c_.admin_port(), "/api/v1/fleet/revoke", body,
                             {{"Authorization", "Bearer " + kToken}});
  ASSERT_EQ(done.status, 200) << done.body;
  const auto lost = held_b.NextEvent(milliseconds(10'000));
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ((*lost)["reason"], "revoked");
  EXPECT_EQ(WaitChild(outer, milliseconds(30'000)), 0) << Out(0);
  EXPECT_EQ(WaitChild(closer, milliseconds(30'000)), 0) << Out(1);
  EXPECT_EQ(WaitChild(bystander, milliseconds(30'000)), 0) << Out(2);
  spawned_.clear();
  EXPECT_TRUE(AwaitDeadlocks(c_, 0).empty());
}

TEST_F(DeadlockTest, ThreeProcessesInACircleAreOneDeadlockOfThree) {
  auto on_a = a_.Connect();
  auto on_b = b_.Connect();
  ASSERT_TRUE(on_a.Acquire("ring:x", 10'000, 1'000, true).value("ok", false));
  ASSERT_TRUE(on_b.Acquire("ring:y", 10'000, 1'000, true).value("ok", false));
  // z is held by a process of its own through C, which waits for x there.
  const pid_t z = Lock(c_, "ring:z", {LockwardenBinary(), "lock", "--socket", c_.socket_path(),
                                      "--wait", "120s", "ring:x", "--", "true"});
  AwaitHeld("ring:z");
  Lock(a_, "ring:y");  // this process, through A
  Lock(b_, "ring:z");  // this process, through B
  const json deadlocks = AwaitDeadlocks(c_, 1);
  ASSERT_EQ(deadlocks.size(), 1u);
  EXPECT_EQ(Actors(deadlocks[0]), (std::set<std::pair<std::string, int>>{
                                      {"agent-a", self_}, {"agent-b", self_}, {"agent-c", z}}));
  EXPECT_EQ(deadlocks[0]["cycle"].size(), 3u);
}

TEST_F(DeadlockTest, ACycleThroughASemaphoresPermitsLeavesOutAPermitHolderThatDoesNotWait) {
  // pool (2 permits): one through A and one through C, both this process's; m through B.
  auto on_a = a_.Connect();
  auto on_b = b_.Connect();
  auto on_c = c_.Connect();
  const client::Client::HoldKind permit{.permits = 2};
  ASSERT_TRUE(on_a.Acquire("sem:pool", 10'000, 1'000, permit, true).value("ok", false));
  ASSERT_TRUE(on_c.Acquire("sem:pool", 10'000, 1'000, permit, true).value("ok", false));
  ASSERT_TRUE(on_b.Acquire("sem:m", 10'000, 1'000, true).value("ok", false));
  Lock(a_, "sem:m");                                      // A waits for m (B's)
  Lock(b_, "sem:pool", {"true"}, {"--permits", "2"});    // B waits for a permit (A's or C's)
  const json deadlocks = AwaitDeadlocks(b_, 1);
  ASSERT_EQ(deadlocks.size(), 1u);
  EXPECT_EQ(Actors(deadlocks[0]),
            (std::set<std::pair<std::string, int>>{{"agent-a", self_}, {"agent-b", self_}}))
      << "C's permit holder waits for nothing: not in the deadlock";
  const json* b = EntryOf(deadlocks[0], "agent-b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ((*b)["waits_for"], "sem:pool");
}

}  // namespace
}  // namespace lw::test::deadlock
