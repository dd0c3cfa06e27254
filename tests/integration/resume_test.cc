// Locks that outlive the agent's process (docs/safety.md "Resume"): a client of the agent's
// next run on the same socket resumes what it held, by token, after a kill -9 or a stop; a
// `lockwarden lock` job keeps running across it, and a `lockwarden elect` job keeps leading;
// nothing that cannot be confirmed is resumed,
// and no other agent can take the lock meanwhile.

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::resume {
namespace {

using lw::client::Client;
using nlohmann::json;

std::string Code(const json& reply) { return reply.value("error", reply.value("ok", false) ? "ok" : "?"); }

class ResumeTest : public ::testing::Test {
 protected:
  ~ResumeTest() override { std::filesystem::remove_all(dir_); }
  // An agent on the test's socket (so that the next one serves the same socket).
  std::unique_ptr<AgentProcess> Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--socket", socket_});
    return std::make_unique<AgentProcess>(cluster_, extra);
  }
  // Another agent of the fleet, on a socket of its own.
  std::unique_ptr<AgentProcess> Elsewhere() { return std::make_unique<AgentProcess>(cluster_); }
  // The lock cannot be taken by anyone else now.
  void ExpectHeldAgainstOthers(AgentProcess& other, const std::string& resource) {
    Client c = other.Connect();
    EXPECT_EQ(Code(c.Acquire(resource, 5'000, 0)), "timeout") << other.Log();
  }
  // The agent renewed a lock `n` times (a whole ttl after a resume, for n = 3).
  static void AwaitRenewals(AgentProcess& agent, int n) {
    ASSERT_TRUE(Eventually(
        [&] {
          return MetricNow(agent.admin_port(), "lockwarden_renewals_total",
                           {{"outcome", "extended"}}) >= n;
        },
        milliseconds(30'000)))
        << agent.Log();
  }
  static void Kill(AgentProcess& agent) {
    agent.Signal(SIGKILL);
    ASSERT_EQ(agent.WaitExit(milliseconds(15'000)), 128 + SIGKILL);
  }

  RedisCluster cluster_{3};
  std::string dir_ = MakeTempDir("lw-resume-");
  std::string socket_ = dir_ + "/agent.sock";
  std::string go_ = dir_ + "/go";
  std::string out_ = dir_ + "/lock.out";
};

// `lockwarden lock --ttl 6s RESOURCE -- sh`: says "$LOCKWARDEN_TOKEN" into the fifo, then runs
// until the file go_ exists and says job-finished. A 6 s ttl leaves at least 4 s of validity at
// any moment (renewed at a third of it) for the next run to start in, sanitizers included.
pid_t LockJob(const std::string& socket, const std::string& resource, const std::string& fifo,
              const std::string& go, const std::string& out) {
  return SpawnTestProcess({LockwardenBinary(), "lock", "--socket", socket, "--ttl", "6s", resource,
                           "--", "sh", "-c",
                           "echo \"$LOCKWARDEN_TOKEN\" > " + fifo + "; while [ ! -e " + go +
                               " ]; do sleep 0.02; done; echo job-finished"},
                          out);
}


TEST_F(ResumeTest, ALockJobKeepsRunningAcrossAKillOfItsAgent) {
  auto agent = Start();
  auto other = Elsewhere();
  Fifo fifo(dir_ + "/fifo");
  const pid_t job = LockJob(socket_, "exp:job", fifo.path(), go_, out_);
  const std::string token = fifo.ReadLine(milliseconds(15'000));
  ASSERT_EQ(token.size(), 40u) << ReadFile(out_);

  Kill(*agent);
  // Down: the keys stay, and nobody else may take the lock.
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("exp:job"), token, 3), 3);
  ExpectHeldAgainstOthers(*other, "exp:job");

  auto next = Start();
  ASSERT_TRUE(Eventually([&] { return ReadFile(out_).find("resumed lock") != std::string::npos; },
                         milliseconds(15'000)))
      << ReadFile(out_) << next->Log();
  // The next run renews it, three times: a whole 6 s ttl after the resume.
  AwaitRenewals(*next, 3);
  EXPECT_EQ(MetricNow(next->admin_port(), "lockwarden_resumes_total", {{"outcome", "resumed"}}),
            1);
  ExpectHeldAgainstOthers(*other, "exp:job");
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("exp:job"), token, 3), 3);

  std::ofstream(go_) << "go\n";
  EXPECT_EQ(WaitChild(job, milliseconds(15'000)), 0) << ReadFile(out_);
  EXPECT_NE(ReadFile(out_).find("job-finished"), std::string::npos) << ReadFile(out_);
  EXPECT_EQ(ReadFile(out_).find("was lost"), std::string::npos) << ReadFile(out_);
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("exp:job")), 0) << "released through the next run";
}

TEST_F(ResumeTest, ALockJobOfSeveralResourcesResumesThemAllAcrossAKillOfItsAgent) {
  auto agent = Start();
  auto other = Elsewhere();
  Fifo fifo(dir_ + "/fifo");
  const pid_t job = SpawnTestProcess(
      {LockwardenBinary(), "lock", "--socket", socket_, "--ttl", "6s", "exp:a", "exp:b", "--",
       "sh", "-c",
       "echo $LOCKWARDEN_TOKENS > " + fifo.path() + "; while [ ! -e " + go_ +
           " ]; do sleep 0.02; done; echo job-finished"},
      out_);
  const std::string tokens = fifo.ReadLine(milliseconds(15'000));
  ASSERT_EQ(tokens.size(), 81u) << ReadFile(out_);
  const std::string token_a = tokens.substr(0, 40), token_b = tokens.substr(41);

  Kill(*agent);
  auto next = Start();
  ASSERT_TRUE(Eventually(
      [&] { return ReadFile(out_).find("resumed locks \"exp:a\", \"exp:b\"") != std::string::npos; },
      milliseconds(15'000)))
      << ReadFile(out_) << next->Log();
  AwaitRenewals(*next, 6);  // both, a whole ttl after the resume
  EXPECT_EQ(MetricNow(next->admin_port(), "lockwarden_resumes_total", {{"outcome", "resumed"}}),
            2);
  ExpectHeldAgainstOthers(*other, "exp:a");
  ExpectHeldAgainstOthers(*other, "exp:b");
  EXPECT_TRUE(Eventually(
      [&] {
        return cluster_.CountHoldingGrant(KeyOf("exp:a"), token_a) == 3 &&
               cluster_.CountHoldingGrant(KeyOf("exp:b"), token_b) == 3;
      },
      milliseconds(15'000)));

  std::ofstream(go_) << "go\n";
  EXPECT_EQ(WaitChild(job, milliseconds(15'000)), 0) << ReadFile(out_);
  EXPECT_EQ(ReadFile(out_).find("was lost"), std::string::npos) << ReadFile(out_);
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("exp:a")), 0) << "released through the next run";
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("exp:b")), 0) << "released through the next run";
}

TEST_F(ResumeTest, AnElectJobKeepsLeadingAcrossAKillOfItsAgent) {
  auto agent = Start();
  auto other = Elsewhere();
  Fifo fifo(dir_ + "/fifo");
  const pid_t job = SpawnTestProcess(
      {LockwardenBinary(), "elect", "--socket", socket_, "--ttl", "6s", "--value", "host-a:1",
       "exp:leader", "--", "sh", "-c",
       "echo \"$LOCKWARDEN_TOKEN $LOCKWARDEN_TERM\" > " + fifo.path() + "; while [ ! -e " + go_ +
           " ]; do sleep 0.02; done; echo job-finished"},
      out_);
  const std::string line = fifo.ReadLine(milliseconds(15'000));
  ASSERT_EQ(line.size(), 42u) << line << ReadFile(out_);  // the token, a space, term 1
  const std::string token = line.substr(0, 40);
  const int64_t term = std::stoll(line.substr(41));

  Kill(*agent);
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("exp:leader"), token, 3), 3);
  auto next = Start();
  ASSERT_TRUE(Eventually(
      [&] { return ReadFile(out_).find("resumed leadership") != std::string::npos; },
      milliseconds(15'000)))
      << ReadFile(out_) << next->Log();
  Client o = other->Connect();
  const json leader = o.Leader("exp:leader");
  ASSERT_TRUE(leader.value("ok", false)) << leader;
  EXPECT_EQ(leader["leader"].value("term", int64_t{0}), term) << leader;
  EXPECT_EQ(leader["leader"].value("value", ""), "host-a:1") << leader;
  // The next run renews it past a whole ttl, and no other candidate is elected meanwhile.
  AwaitRenewals(*next, 3);
  const json rival = o.Campaign("exp:leader", "host-b:2", 5'000, 300);
  EXPECT_EQ(Code(rival), "timeout") << rival;

  std::ofstream(go_) << "go\n";
  EXPECT_EQ(WaitChild(job, milliseconds(15'000)), 0) << ReadFile(out_);
  EXPECT_NE(ReadFile(out_).find("job-finished"), std::string::npos) << ReadFile(out_);
  EXPECT_EQ(ReadFile(out_).find("was lost"), std::string::npos) << ReadFile(out_);
  EXPECT_TRUE(o.Leader("exp:leader")["leader"].is_null()) << "resigned through the next run";
}

TEST_F(ResumeTest, ALockCommandWaitingAcrossAKillWaitsAgainThroughTheNextRun) {
  auto agent = Start();
  Client holder = agent->Connect();
  const json held = holder.Acquire("w:busy", 60'000, 0);
  ASSERT_TRUE(held.value("ok", false)) << held;
  const pid_t waiter = SpawnTestProcess({LockwardenBinary(), "lock", "--socket", socket_, "--wait",
                                         "60s", "w:busy", "--", "true"},
                                        out_);
  ASSERT_TRUE(Eventually(
      [&] { return agent->Connect().Call({{"op", "locks"}})["locks"][0].value("waiters", 0) == 1; },
      milliseconds(15'000)));
  Kill(*agent);
  auto next = Start();
  ASSERT_TRUE(Eventually(
      [&] { return ReadFile(out_).find("again through its next run") != std::string::npos; },
      milliseconds(15'000)))
      << ReadFile(out_);
  // The holder resumes, then lets go: the waiter, queued again on the next run, gets the lock.
  Client again = next->Connect();
  ASSERT_TRUE(again.Resume("w:busy", held["token"], 60'000, false, {}).value("ok", false));
  ASSERT_TRUE(again.Release("w:busy", held["token"]).value("ok", false));
  EXPECT_EQ(WaitChild(waiter, milliseconds(15'000)), 0) << ReadFile(out_);
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("w:busy")), 0);
}

TEST_F(ResumeTest, ADetachedLeaseOfTheEarlierRunIsExtendedAndReleasedByTokenThroughTheNext) {
  auto agent = Start();
  std::string leases[2];
  {
    Client c = agent->Connect();
    for (auto* r : {"lease:a", "lease:b"}) {
      const json got = c.Call({{"op", "acquire"}, {"resource", r}, {"ttl_ms", 20'000},
                               {"detach", true}});
      ASSERT_TRUE(got.value("ok", false)) << got;
      leases[r == std::string("lease:a") ? 0 : 1] = got["token"];
    }
  }
  Kill(*agent);
  auto next = Start();
  Client n = next->Connect();
  const json extended = n.Extend("lease:a", leases[0], 50'000);
  ASSERT_TRUE(extended.value("ok", false)) << extended << next->Log();
  EXPECT_GT(extended.value("validity_ms", 0), 40'000) << "extended past its 20 s";
  EXPECT_EQ(Code(n.Extend("lease:a", std::string(40, 'e'), 50'000)), "not_held");
  // Adopted as a lease: another connection of the uid releases it.
  EXPECT_TRUE(next->Connect().Release("lease:a", leases[0]).value("ok", false));
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("lease:a")), 0);
  EXPECT_TRUE(n.Release("lease:b", leases[1]).value("ok", false)) << next->Log();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("lease:b")), 0);
}

TEST_F(ResumeTest, AStopLeavesTheLocksForTheNextRunUnlessReleaseOnStop) {
  auto agent = Start();
  Client c = agent->Connect();
  const json held = c.Acquire("stop:kept", 60'000, 0, /*renew=*/true);
  ASSERT_TRUE(held.value("ok", false)) << held;
  const std::string token = held["token"];
  agent->Signal(SIGTERM);
  ASSERT_EQ(agent->WaitExit(milliseconds(15'000)), 0) << agent->Log();
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("stop:kept"), token, 3), 3) << "left for a resume";
  struct stat st{};
  EXPECT_NE(stat(socket_.c_str(), &st), 0) << "socket file left behind";

  auto next = Start({"--release-on-stop", "true"});
  Client again = next->Connect();
  const json resumed = again.Resume("stop:kept", token, 60'000, /*renew=*/true, {});
  ASSERT_TRUE(resumed.value("ok", false)) << resumed << next->Log();
  EXPECT_EQ(resumed.value("token", ""), token);
  EXPECT_GT(resumed.value("validity_ms", 0), 50'000);
  const json mine = again.Held();
  ASSERT_EQ(mine["locks"].size(), 1u) << mine;
  EXPECT_EQ(mine["locks"][0].value("token", ""), token);
  // This run releases on stop: the resumed lock goes with it.
  next->Signal(SIGTERM);
  ASSERT_EQ(next->WaitExit(milliseconds(15'000)), 0) << next->Log();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("stop:kept")), 0);
}

TEST_F(ResumeTest, OnlyWhatAQuorumStillHoldsForThatTokenIsResumed) {
  auto agent = Start();
  Client c = agent->Connect();
  const json kept = c.Acquire("r:kept", 60'000, 0);
  const json brief = c.Acquire("r:brief", 1'000, 0);
  ASSERT_TRUE(kept.value("ok", false) && brief.value("ok", false)) << kept << brief;
  Kill(*agent);
  ASSERT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("r:brief")) == 0; },
                         milliseconds(15'000)));

  // Another agent's run (another id) cannot resume it, and its try deletes nothing.
  auto other = Elsewhere();
  Client o = other->Connect();
  EXPECT_EQ(Code(o.Resume("r:kept", kept["token"], 10'000, false, {})), "not_held");
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("r:kept"), kept["token"], 3), 3);

  auto next = Start();
  Client n = next->Connect();
  const std::string forged(40, 'a');
  EXPECT_EQ(Code(n.Resume("r:kept", forged, 10'000, false, {})), "not_held");
  EXPECT_EQ(Code(n.Resume("r:brief", brief["token"], 10'000, false, {})), "not_held")
      << "expired before the resume";
  EXPECT_EQ(Code(n.Resume("r:kept", kept["token"], 10'000, false, {0, /*shared=*/true})),
            "not_held")
      << "it is not a read hold";
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("r:kept"), kept["token"], 3), 3);
  const json ok = n.Resume("r:kept", kept["token"], 10'000, false, {});
  ASSERT_TRUE(ok.value("ok", false)) << ok << next->Log();
  EXPECT_EQ(Code(n.Resume("r:kept", kept["token"], 10'000, false, {})), "bad_request")
      << "held already";
  EXPECT_EQ(MetricNow(next->admin_port(), "lockwarden_resumes_total", {{"outcome", "not_held"}}),
            3);
  ASSERT_TRUE(n.Release("r:kept", kept["token"]).value("ok", false));
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("r:kept")), 0);
}

TEST_F(ResumeTest, PermitsAndReadHoldsResumeAsTheirGrantsSaid) {
  auto agent = Start();
  Client c = agent->Connect();
  const json permit = c.Acquire("pool", 60'000, 0, {.permits = 2, .shared = false});
  const json reader = c.Acquire("doc", 60'000, 0, {.permits = 0, .shared = true});
  ASSERT_TRUE(permit.value("ok", false) && reader.value("ok", false)) << permit << reader;
  const int p = permit.value("permit", -1);
  Kill(*agent);

  auto next = Start();
  Client n = next->Connect();
  EXPECT_EQ(Code(n.Resume("pool", permit["token"], 10'000, false, {2, false}, 1 - p)),
            "not_held")
      << "another permit";
  const json again = n.Resume("pool", permit["token"], 10'000, false, {2, false}, p);
  ASSERT_TRUE(again.value("ok", false)) << again << next->Log();
  EXPECT_EQ(again.value("permit", -1), p);
  const json read = n.Resume("doc", reader["token"], 10'000, false, {0, true});
  ASSERT_TRUE(read.value("ok", false)) << read << next->Log();
  EXPECT_EQ(read.value("mode", ""), "shared");
  // Held as before: the other permit is free, the resumed one is not; a writer is kept out.
  Client w = next->Connect();
  const json second = w.Acquire("pool", 5'000, 0, {2, false});
  ASSERT_TRUE(second.value("ok", false)) << second;
  EXPECT_EQ(second.value("permit", -1), 1 - p);
  EXPECT_EQ(Code(w.Acquire("doc", 5'000, 0)), "timeout");
}

TEST_F(ResumeTest, AReentrantHoldResumesAtTheDepthItsClientCounts) {
  auto agent = Start();
  Client c = agent->Connect();
  const json ask = {{"op", "acquire"}, {"resource", "deep"}, {"ttl_ms", 60'000},
                    {"owner", 3}, {"reentrant", true}};
  const json first = c.Call(ask);
  const json second = c.Call(ask);
  ASSERT_EQ(second.value("depth", 0), 2) << first << second;
  Kill(*agent);

  auto next = Start();
  Client n = next->Connect();
  const json again = n.Call({{"op", "resume"}, {"resource", "deep"}, {"token", first["token"]},
                             {"ttl_ms", 10'000}, {"owner", 3}, {"depth", 2}});
  ASSERT_TRUE(again.value("ok", false)) << again << next->Log();
  EXPECT_EQ(again.value("depth", 0), 2);
  // Owner 3 asking again without reentrant would wait for itself: the owner came along.
  EXPECT_EQ(Code(n.Call({{"op", "acquire"}, {"resource", "deep"}, {"owner", 3},
                         {"wait_ms", 30'000}})),
            "would_deadlock");
  EXPECT_EQ(n.Release("deep", first["token"]).value("depth", 0), 1);
  Client w = next->Connect();
  EXPECT_EQ(Code(w.Acquire("deep", 5'000, 0)), "timeout") << "still held at depth 1";
  EXPECT_FALSE(n.Release("deep", first["token"]).contains("depth"));
  EXPECT_TRUE(w.Acquire("deep", 5'000, 0).value("ok", false));
}

}  // namespace
}  // namespace lw::test::resume
