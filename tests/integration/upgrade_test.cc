// The in-place upgrade (docs/upgrade.md), with real agents and masters: everything live on the
// agent carries on in the new process over the same connections (a renewed lock, a waiter, a
// `lockwarden lock` job, a detached lease, an election's leader and an observer, a half-closed
// waiter), nobody else can take those locks meanwhile, and an upgrade whose new process cannot
// start leaves the old agent serving.

#include <signal.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "metrics_util.h"
#include "state_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::upgrade {
namespace {

using lw::client::Client;
using nlohmann::json;

constexpr milliseconds kAwait{15'000};

std::string Code(const json& reply) {
  return reply.value("error", reply.value("ok", false) ? "ok" : "?");
}

json Reply(Client& c) {
  auto line = c.ReadLine(kAwait);
  return line ? json::parse(*line) : json{{"error", "no reply in time"}};
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

// The agent serving on `agent`'s admin port has extended holds at least `n` times (its counters
// start from 0 in a new process).
bool Renewed(const AgentProcess& agent, double n) {
  return Eventually(
      [&] {
        return MetricNow(agent.admin_port(), "lockwarden_renewals_total",
                         {{"outcome", "extended"}}) >= n;
      },
      kAwait);
}

class UpgradeTest : public ::testing::Test {
 protected:
  ~UpgradeTest() override {
    // SIGTERM: `lockwarden lock` passes it on to its command, then exits.
    if (job_ > 0 && kill(job_, SIGTERM) == 0 && WaitChild(job_, milliseconds(5'000)) < 0) {
      kill(job_, SIGKILL);
      WaitChild(job_, milliseconds(5'000));
    }
    // The new process is no child of the test (the old agent started it): ended here.
    for (pid_t pid : started_) {
      if (!Alive(pid)) continue;
      kill(pid, SIGTERM);
      if (!Eventually([pid] { return !Alive(pid); }, milliseconds(5'000))) kill(pid, SIGKILL);
    }
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<AgentProcess> Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--socket", socket_});
    return std::make_unique<AgentProcess>(cluster_, extra);
  }
  // Asks the agent on the test's socket to upgrade; remembers the new process to end it.
  json Upgrade() {
    Client c(socket_);
    json reply = c.Call({{"op", "upgrade"}}, milliseconds(60'000));
    if (reply.value("ok", false)) started_.push_back(reply.value("pid", 0));
    return reply;
  }
  // On the test's socket: a renewed lock of ttl 2 s (without renewals it is gone within 2 s),
  // a lock held for a minute, and an acquire waiting behind it (its reply read later).
  struct Live {
    Client renewed, holder, waiter;
    json renewed_grant, busy_grant;
  };
  Live HoldSome(const std::string& prefix) {
    Live live{Client(socket_), Client(socket_), Client(socket_), {}, {}};
    live.renewed_grant = live.renewed.Acquire(prefix + "renewed", 2'000, 0, /*renew=*/true);
    live.busy_grant = live.holder.Acquire(prefix + "busy", 60'000, 0);
    live.waiter.SendRaw(json{{"id", "w"}, {"op", "acquire"}, {"resource", prefix + "busy"},
                             {"ttl_ms", 5'000}, {"wait_ms", 60'000}}
                            .dump() +
                        "\n");
    return live;
  }
  void ExpectHeldAgainstOthers(AgentProcess& other, const std::string& resource) {
    Client c = other.Connect();
    EXPECT_EQ(Code(c.Acquire(resource, 5'000, 0)), "timeout") << resource;
  }

  // The body of EverythingLiveOnTheAgentCarriesOnInTheNewProcess (its log shown on a throw).
  void CarryOn(AgentProcess* agent);
  RedisCluster cluster_{3};
  std::string dir_ = MakeTempDir("lw-upgrade-");
  std::string socket_ = dir_ + "/agent.sock";
  std::vector<pid_t> started_;
  pid_t job_ = -1;  // a `lockwarden lock` job, killed if a failure left it running
};

TEST_F(UpgradeTest, EverythingLiveOnTheAgentCarriesOnInTheNewProcess) {
  auto agent = Start();
  try {
    CarryOn(agent.get());
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\n" << agent->Log();
  }
}

void UpgradeTest::CarryOn(AgentProcess* agent) {
  AgentProcess other(cluster_);
  Live live = HoldSome("u:");
  auto& [renewed, holder, waiter, r, h] = live;
  ASSERT_TRUE(r.value("ok", false)) << r;
  ASSERT_TRUE(h.value("ok", false)) << h;
  // A `lockwarden lock` job (ttl 2 s: renewed by the agent).
  const std::string go = dir_ + "/go", out = dir_ + "/lock.out";
  Fifo fifo(dir_ + "/fifo");
  const pid_t job = job_ = SpawnTestProcess(
      {LockwardenBinary(), "lock", "--socket", socket_, "--ttl", "2s", "u:job", "--", "sh", "-c",
       "echo \"$LOCKWARDEN_TOKEN\" > " + fifo.path() + "; while [ ! -e " + go +
           " ]; do sleep 0.02; done; echo job-finished"},
      out);
  ASSERT_EQ(fifo.ReadLine(kAwait).size(), 40u) << ReadFile(out);
  // A detached lease, an election's leader and an observer of it.
  Client lease_maker(socket_);
  const json lease = lease_maker.Call({{"op", "acquire"}, {"resource", "u:lease"},
                                       {"ttl_ms", 60'000}, {"detach", true}});
  ASSERT_TRUE(lease.value("ok", false)) << lease;
  Client leader(socket_);
  const json elected = leader.Campaign("u:election", "host-a:1", 2'000, 0);
  ASSERT_TRUE(elected.value("ok", false)) << elected;
  Client observer(socket_);
  ASSERT_EQ(observer.Observe("u:election").value("leader", json()).value("value", ""),
            "host-a:1");
  ASSERT_TRUE(Eventually(
      [&] { return Client(socket_).Call({{"op", "locks"}})["locks"].size() == 5; }, kAwait));

  const pid_t old_pid = agent->pid();
  const json up = Upgrade();
  ASSERT_TRUE(up.value("ok", false)) << up << agent->Log();
  EXPECT_EQ(up.value("previous_pid", 0), old_pid);
  EXPECT_NE(up.value("pid", 0), old_pid);
  EXPECT_EQ(up.value("locks", 0), 5) << up;
  EXPECT_EQ(agent->WaitExit(kAwait), 0) << "the old process exits once handed over";

  // Three renewals of each of the three renewed holds (the lock, the job's, the leadership),
  // a whole 2 s ttl past the hand-over, by the new process (its counters start from 0).
  ASSERT_TRUE(Renewed(*agent, 9)) << agent->Log();
  const json held = renewed.Held();
  ASSERT_EQ(held["locks"].size(), 1u) << held;
  EXPECT_EQ(held["locks"][0].value("token", ""), r.value("token", ""));
  for (const char* resource : {"u:renewed", "u:busy", "u:job", "u:lease"}) {
    ExpectHeldAgainstOthers(other, resource);
  }
  EXPECT_EQ(Client(socket_).Leader("u:election")["leader"].value("term", 0),
            elected.value("term", -1));
  EXPECT_FALSE(renewed.NextEvent(milliseconds(0)).has_value()) << "no lost event";

  // The waiter kept its place: the holder's release through the new process grants it.
  ASSERT_TRUE(holder.Release("u:busy", h.value("token", "")).value("ok", false));
  const json granted = Reply(waiter);
  EXPECT_TRUE(granted.value("ok", false)) << granted << agent->Log();
  EXPECT_EQ(granted.value("id", ""), "w");
  // The detached lease is released by its token through the new process.
  // Awaited, not read at once: the answer can come before every master's copy is gone (a master
  // answering after its node timeout, as seen once under ASan, or a reservation the release
  // leaves for other's refused attempt while its departure is still on the way). The key's 60 s
  // ttl outlasts the wait, so only the release can empty the masters.
  EXPECT_TRUE(Client(socket_).Release("u:lease", lease.value("token", "")).value("ok", false));
  EXPECT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("u:lease")) == 0; }, kAwait))
      << cluster_.CountWithKey(KeyOf("u:lease")) << " master(s) still hold the lease";
  // The job finishes normally, and the observer hears the leader resign.
  std::ofstream(go) << "go\n";
  EXPECT_EQ(WaitChild(job, kAwait), 0) << ReadFile(out);
  job_ = -1;
  EXPECT_EQ(ReadFile(out).find("was lost"), std::string::npos) << ReadFile(out);
  ASSERT_TRUE(leader.Resign("u:election", elected.value("token", "")).value("ok", false));
  bool heard_none = false;
  for (int i = 0; i < 10 && !heard_none; ++i) {
    const auto event = observer.NextEvent(kAwait);
    if (!event) break;
    heard_none = event->value("leader", json()).is_null();
  }
  EXPECT_TRUE(heard_none) << "the observer follows the election through the new process";
}

TEST_F(UpgradeTest, AReentrantHoldKeepsItsOwnerAndDepthInTheNewProcess) {
  auto agent = Start();
  AgentProcess other(cluster_);
  Client c(socket_);
  const json ask = {{"op", "acquire"}, {"resource", "u:deep"}, {"ttl_ms", 2'000},
                    {"renew", true}, {"owner", 3}, {"reentrant", true}};
  const json first = c.Call(ask);
  ASSERT_EQ(c.Call(ask).value("depth", 0), 2) << first;
  const json up = Upgrade();
  ASSERT_TRUE(up.value("ok", false)) << up << agent->Log();
  EXPECT_EQ(agent->WaitExit(kAwait), 0);
  // Through the new process: the owner is known (asked again, it would wait for itself), the
  // depth is 2 (the first release leaves it held), and the renewals go on.
  EXPECT_EQ(Code(c.Call({{"op", "acquire"}, {"resource", "u:deep"}, {"owner", 3},
                         {"wait_ms", 30'000}})),
            "would_deadlock");
  EXPECT_EQ(c.Release("u:deep", first["token"]).value("depth", 0), 1);
  ExpectHeldAgainstOthers(other, "u:deep");
  EXPECT_FALSE(c.Release("u:deep", first["token"]).contains("depth"));
  EXPECT_TRUE(other.Connect().Acquire("u:deep", 5'000, 0).value("ok", false));
}

TEST_F(UpgradeTest, ANewProcessThatCannotStartLeavesTheOldAgentServing) {
  const std::string config = dir_ + "/config.toml";
  std::ofstream(config) << "log_level = \"debug\"\n";
  auto agent = Start({"--config", config});
  Live live = HoldSome("f:");
  auto& [renewed, holder, waiter, r, h] = live;
  ASSERT_TRUE(r.value("ok", false)) << r;
  ASSERT_TRUE(h.value("ok", false)) << h;
  ASSERT_TRUE(Eventually(
      [&] { return Client(socket_).Call({{"op", "locks"}})["locks"][1].value("waiters", 0) +
                   Client(socket_).Call({{"op", "locks"}})["locks"][0].value("waiters", 0) == 1; },
      kAwait));
  // The new process reads the config again, and it no longer loads.
  std::ofstream(config) << "no_such_setting = 1\n";
  const json up = Upgrade();
  EXPECT_EQ(Code(up), "unavailable") << up;
  EXPECT_NE(up.value("message", "").find("keeps serving"), std::string::npos) << up;
  EXPECT_TRUE(Alive(agent->pid()));
  EXPECT_NE(agent->Log().find("upgrade failed"), std::string::npos) << agent->Log();
  // Same process, same connections: the lock is still renewed, the waiter still waits and is
  // granted at the release, new connections are accepted.
  const json held = renewed.Held();
  ASSERT_EQ(held["locks"].size(), 1u) << held;
  EXPECT_TRUE(holder.Release("f:busy", h.value("token", "")).value("ok", false));
  const json granted = Reply(waiter);
  EXPECT_TRUE(granted.value("ok", false)) << granted << agent->Log();
  EXPECT_TRUE(Client(socket_).Ping().value("ok", false));
  EXPECT_FALSE(renewed.NextEvent(milliseconds(0)).has_value());
}

TEST_F(UpgradeTest, SighupReadsTheSettingsAgainAndKeepsEveryLock) {
  const std::string config = dir_ + "/config.toml";
  std::ofstream(config) << "max_locks_per_session = 4\n";
  auto agent = Start({"--config", config});
  Client renewed(socket_);
  const json r = renewed.Acquire("h:renewed", 2'000, 0, /*renew=*/true);
  ASSERT_TRUE(r.value("ok", false)) << r;
  std::ofstream(config) << "max_locks_per_session = 1\n";
  const pid_t old_pid = agent->pid();
  ASSERT_EQ(kill(old_pid, SIGHUP), 0);
  // The old process exits once a new run of the same binary took everything over.
  EXPECT_EQ(agent->WaitExit(kAwait), 0) << agent->Log();
  const json state = StateWhen(
      *agent, [old_pid](const json& s) { return s["agent"].value("pid", old_pid) != old_pid; },
      kAwait);
  const pid_t new_pid = state["agent"].value("pid", 0);
  ASSERT_NE(new_pid, 0) << state;
  started_.push_back(new_pid);
  // The new limit holds; the lock held across is the same hold, renewed past its ttl.
  Client fresh(socket_);
  ASSERT_TRUE(fresh.Acquire("h:one", 5'000, 30'000).value("ok", false));
  EXPECT_EQ(Code(fresh.Acquire("h:two", 5'000, 0)), "too_many") << agent->Log();
  ASSERT_TRUE(Renewed(*agent, 2)) << agent->Log();
  const json held = renewed.Held();
  ASSERT_EQ(held["locks"].size(), 1u) << held;
  EXPECT_EQ(held["locks"][0].value("token", ""), r.value("token", ""));
  EXPECT_FALSE(renewed.NextEvent(milliseconds(0)).has_value()) << "no lost event";
  EXPECT_NE(agent->Log().find("SIGHUP: reading the settings again"), std::string::npos);
}

// A client that shut down its writing side while its acquire waits (docs/protocol.md, end of
// input) is answered through the new process, whose session then ends and releases the grant.
TEST_F(UpgradeTest, AHalfClosedWaiterIsAnsweredThroughTheNewProcess) {
  auto agent = Start();
  Client holder(socket_);
  const json busy = holder.Acquire("h:busy", 60'000, 30'000);
  ASSERT_TRUE(busy.value("ok", false)) << busy;
  Client waiter(socket_);
  waiter.SendRaw(json{{"id", "w"}, {"op", "acquire"}, {"resource", "h:busy"}, {"ttl_ms", 5'000},
                      {"wait_ms", 60'000}}
                     .dump() +
                 "\n");
  ASSERT_EQ(shutdown(waiter.fd(), SHUT_WR), 0);
  ASSERT_TRUE(Eventually(
      [&] { return agent->Log().find("end of input") != std::string::npos; }, kAwait));

  const json up = Upgrade();
  ASSERT_TRUE(up.value("ok", false)) << up << agent->Log();
  EXPECT_EQ(agent->WaitExit(kAwait), 0) << "the old process exits once handed over";
  ASSERT_TRUE(holder.Release("h:busy", busy.value("token", "")).value("ok", false));
  const json granted = Reply(waiter);
  EXPECT_TRUE(granted.value("ok", false)) << granted;
  EXPECT_EQ(granted.value("id", ""), "w");
  EXPECT_THROW(waiter.ReadLine(kAwait), lw::client::ClientError) << "the session ends";
  Client other(socket_);
  EXPECT_TRUE(other.Acquire("h:busy", 5'000, kAwait.count()).value("ok", false))
      << "released when the session ended";
}

TEST_F(UpgradeTest, OnlyRootAndTheAgentsOwnUserMayUpgrade) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  auto agent = Start({"--socket-mode", "0666"});
  std::filesystem::permissions(dir_, std::filesystem::perms(0755));  // the fixture's is 0700
  const std::string out = dir_ + "/nobody.out";
  // A client running as nobody: the agent refuses with forbidden, and does nothing.
  const pid_t p = SpawnTestProcess({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                    LockwardenBinary(), "upgrade", "--socket", socket_},
                                   out);
  EXPECT_EQ(WaitChild(p, kAwait), 64) << ReadFile(out);
  EXPECT_NE(ReadFile(out).find("forbidden"), std::string::npos) << ReadFile(out);
  EXPECT_EQ(agent->Log().find("upgrade: started"), std::string::npos);
}

}  // namespace
}  // namespace lw::test::upgrade
