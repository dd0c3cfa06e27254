// Detached leases (acquire "detach": true) with real masters and a real agent: a lease outlives
// the process that took it, is extended and released by token from another process of its uid,
// is refused with `forbidden` to another uid (unless a +leases access rule allows it), ends by
// its ttl, counts toward its uid's limit, and its wait belongs to the acquiring connection; an
// agent's shutdown leaves it on the masters, where another agent ends it by its token
// (lease_fleet_test.cc has more); `lockwarden acquire --detach`, `extend` and `release` round
// trip.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/client.h"
#include "metrics_util.h"
#include "state_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::detached {
namespace {

using lw::client::Client;
using nlohmann::json;
using ::testing::HasSubstr;

// setpriv (util-linux) runs a command as another uid and gid, without supplementary groups.
const std::vector<std::string> kAsNobody = {"setpriv", "--reuid=65534", "--regid=65534",
                                            "--clear-groups"};

struct Ran {
  pid_t pid = -1;
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

class DetachedTest : public ::testing::Test {
 protected:
  // `lockwarden ARGS --socket <agent's>` (after `as`, e.g. kAsNobody), run to its end.
  static Ran Cli(const AgentProcess& agent, const std::vector<std::string>& args,
                 const std::vector<std::string>& as = {}) {
    std::vector<std::string> argv = as;
    argv.push_back(LockwardenBinary());
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--socket", agent.socket_path()});
    const std::string out = MakeTempDir("lw_detached_") + "/out";
    Ran ran;
    ran.pid = SpawnTestProcess(argv, out);
    ran.exit_code = WaitChild(ran.pid, milliseconds(20'000));
    ran.output = ReadFile(out);
    return ran;
  }
  // A detached lease taken by `lockwarden acquire --detach`, which has exited: its token.
  std::string AcquireByCli(const AgentProcess& agent, const std::string& resource,
                           const std::string& ttl = "60s", Ran* ran = nullptr) {
    const Ran r = Cli(agent, {"acquire", "--detach", "--ttl", ttl, "--wait", "0s", resource});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (ran != nullptr) *ran = r;
    return Trimmed(r.output);
  }
  static json Detach(Client& c, const std::string& resource, int64_t ttl_ms, int64_t wait_ms = 0) {
    return c.Call({{"op", "acquire"}, {"resource", resource}, {"ttl_ms", ttl_ms},
                   {"wait_ms", wait_ms}, {"detach", true}});
  }
  static std::string Code(const json& reply) { return reply.value("error", ""); }
  // Lets other uids reach the agent's socket: the fixture's directory is 0700.
  static void OpenToEveryone(const AgentProcess& agent) {
    ASSERT_EQ(chmod(agent.dir().c_str(), 0755), 0);
  }
  // The entry of `locks` (the socket op) for `resource`, or null.
  static json LockEntry(Client& c, const std::string& resource) {
    const json reply = c.Call({{"op", "locks"}});
    for (const json& l : reply.at("locks")) {
      if (l.value("resource", "") == resource) return l;
    }
    return nullptr;
  }

  RedisCluster cluster_{3};
};

TEST_F(DetachedTest, OutlivesItsCreatorAndIsShownWithIt) {
  AgentProcess agent(cluster_, {"--heartbeat-ttl-ms", "3000", "--fleet-refresh-ms", "1000"});
  Ran creator;
  const std::string token = AcquireByCli(agent, "jobs/nightly", "60s", &creator);
  ASSERT_EQ(token.size(), 40u) << creator.output;

  // The acquiring process has exited (its connection closed): the lease is still held.
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("jobs/nightly"), token, 3), 3);
  Client other = agent.Connect();
  EXPECT_EQ(Code(other.Acquire("jobs/nightly", 5'000, 0)), "timeout");

  const json entry = LockEntry(other, "jobs/nightly");
  ASSERT_TRUE(entry.is_object());
  EXPECT_EQ(entry["detached"], true);
  EXPECT_EQ(entry["pid"], creator.pid) << "its creator's, though it is gone";
  EXPECT_EQ(entry["uid"], static_cast<int>(getuid()));
  EXPECT_FALSE(entry.contains("token"));

  const json state = StateWhen(agent, [](const json& s) { return !s["locks"].empty(); });
  ASSERT_EQ(state["locks"].size(), 1u) << state.dump();
  const json& lock = state["locks"][0];
  EXPECT_EQ(lock["detached"], true);
  EXPECT_EQ(lock["pid"], creator.pid);
  EXPECT_THAT(lock["cmdline"].get<std::string>(), HasSubstr("acquire --detach"));

  // The fleet view, from the agent's holder report on the masters.
  json row;
  EXPECT_TRUE(Eventually(
      [&] {
        const HttpResult r = HttpGet(agent.admin_port(), "/api/v1/fleet");
        if (r.status != 200) return false;
        const json view = json::parse(r.body);
        for (const json& l : view.at("locks")) {
          if (l["resource"] == "jobs/nightly" && l["holder"]["detached"] == true) row = l;
        }
        return row.is_object();
      },
      milliseconds(30'000)));
  ASSERT_TRUE(row.is_object());
  EXPECT_EQ(row["holder"]["pid"], creator.pid);
  EXPECT_THAT(row["holder"]["cmdline"].get<std::string>(), HasSubstr("acquire --detach"));
}

TEST_F(DetachedTest, ExtendedAndReleasedByOtherProcessesOfItsUid) {
  AgentProcess agent(cluster_);
  const std::string token = AcquireByCli(agent, "jobs/a", "5s");
  for (int i = 0; i < 3; ++i) EXPECT_LE(cluster_.Pttl(i, KeyOf("jobs/a")), 5'000);

  const Ran extended = Cli(agent, {"extend", "jobs/a", token, "--ttl", "60s"});
  ASSERT_EQ(extended.exit_code, 0) << extended.output;
  EXPECT_GT(std::stoll(extended.output), 5'000) << "the validity printed";
  for (int i = 0; i < 3; ++i) EXPECT_GT(cluster_.Pttl(i, KeyOf("jobs/a")), 5'000);
  // This test process is another process of the same uid too.
  Client mine = agent.Connect();
  const json again = mine.Extend("jobs/a", token, 30'000);
  EXPECT_TRUE(again.value("ok", false)) << again;

  const Ran released = Cli(agent, {"release", "jobs/a", token});
  EXPECT_EQ(released.exit_code, 0) << released.output;
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("jobs/a")), 0);
  EXPECT_TRUE(mine.Acquire("jobs/a", 5'000, 0).value("ok", false));
  const Ran twice = Cli(agent, {"release", "jobs/a", token});
  EXPECT_EQ(twice.exit_code, 72) << twice.output;
  EXPECT_THAT(twice.output, HasSubstr("not_held"));
}

TEST_F(DetachedTest, AnotherUidIsForbidden) {
  AgentProcess agent(cluster_, {"--socket-mode", "0666"});
  OpenToEveryone(agent);
  std::string token;
  {
    Client root = agent.Connect();
    const json granted = Detach(root, "jobs/root", 60'000);
    ASSERT_TRUE(granted.value("ok", false)) << granted;
    token = granted["token"].get<std::string>();
  }
  for (const std::vector<std::string>& op :
       {std::vector<std::string>{"release", "jobs/root", token},
        std::vector<std::string>{"extend", "jobs/root", token, "--ttl", "10s"}}) {
    const Ran refused = Cli(agent, op, kAsNobody);
    EXPECT_EQ(refused.exit_code, 64) << refused.output;
    EXPECT_THAT(refused.output, HasSubstr("forbidden"));
    EXPECT_THAT(refused.output, HasSubstr("uid 65534 may not " + op[0] +
                                          " the detached lease on \"jobs/root\": it was "
                                          "created by uid 0"));
  }
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("jobs/root"), token, 3), 3) << "still held";
  EXPECT_GE(MetricNow(agent.admin_port(), "lockwarden_failures_total",
                      {{"op", "release"}, {"reason", "forbidden"}}),
            1);

  // And the other way round: root is nobody special to a lease of uid 65534.
  const std::string nobodys =
      Trimmed(Cli(agent, {"acquire", "--detach", "jobs/nobody"}, kAsNobody).output);
  ASSERT_EQ(nobodys.size(), 40u) << nobodys;
  Client root = agent.Connect();
  EXPECT_EQ(Code(root.Release("jobs/nobody", nobodys)), "forbidden");
  EXPECT_EQ(Cli(agent, {"release", "jobs/nobody", nobodys}, kAsNobody).exit_code, 0);
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("jobs/nobody")), 0);
}

TEST_F(DetachedTest, ALeasesRuleLetsAnotherUidManageThemUnderItsPrefixes) {
  AgentProcess agent(cluster_, {"--socket-mode", "0666", "--access", "uid:0 *", "--access",
                                "uid:65534 jobs/ +leases"});
  OpenToEveryone(agent);
  Client root = agent.Connect();
  const json jobs = Detach(root, "jobs/a", 60'000);
  const json other = Detach(root, "other/b", 60'000);
  ASSERT_TRUE(jobs.value("ok", false) && other.value("ok", false)) << jobs << other;

  const std::string jobs_token = jobs["token"], other_token = other["token"];
  const Ran extended = Cli(agent, {"extend", "jobs/a", jobs_token}, kAsNobody);
  EXPECT_EQ(extended.exit_code, 0) << extended.output;
  const Ran released = Cli(agent, {"release", "jobs/a", jobs_token}, kAsNobody);
  EXPECT_EQ(released.exit_code, 0) << released.output;
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("jobs/a")), 0);

  const Ran refused = Cli(agent, {"release", "other/b", other_token}, kAsNobody);
  EXPECT_EQ(refused.exit_code, 64) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("forbidden"));
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("other/b"), other_token, 3), 3);
}

TEST_F(DetachedTest, BadTokensAreNotHeld) {
  AgentProcess agent(cluster_);
  const std::string token = AcquireByCli(agent, "jobs/a");
  Client c = agent.Connect();
  const std::string unknown(40, '0');
  EXPECT_EQ(Code(c.Release("jobs/a", unknown)), "not_held");
  EXPECT_EQ(Code(c.Extend("jobs/a", unknown, 10'000)), "not_held");
  EXPECT_EQ(Code(c.Release("jobs/b", token)), "not_held") << "the token of another resource";
  EXPECT_EQ(Code(c.Extend("jobs/b", token, 10'000)), "not_held");
  EXPECT_EQ(Code(c.Release("jobs/a", "not-a-token")), "bad_request");
  // A lock that is not detached stays its connection's: its token is nothing elsewhere.
  Client owner = agent.Connect();
  const json owned = owner.Acquire("jobs/c", 60'000, 0);
  ASSERT_TRUE(owned.value("ok", false));
  const std::string owned_token = owned["token"];
  EXPECT_EQ(Code(c.Release("jobs/c", owned_token)), "not_held");
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("jobs/a"), token, 3), 3);
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("jobs/c"), owned_token, 3), 3);
}

TEST_F(DetachedTest, ItsTtlEndsIt) {
  AgentProcess agent(cluster_);
  const std::string token = AcquireByCli(agent, "jobs/short", "1s");
  Client c = agent.Connect();
  EXPECT_TRUE(Eventually(
      [&] {
        return LockEntry(c, "jobs/short").is_null() &&
               cluster_.CountWithKey(KeyOf("jobs/short")) == 0;
      },
      milliseconds(15'000)));
  EXPECT_EQ(Code(c.Extend("jobs/short", token, 10'000)), "not_held");
  EXPECT_EQ(Code(c.Release("jobs/short", token)), "not_held");
  EXPECT_TRUE(c.Acquire("jobs/short", 5'000, 0).value("ok", false));
}

TEST_F(DetachedTest, AUidsLeasesAreBoundedLikeOneConnectionsLocks) {
  AgentProcess agent(cluster_, {"--max-locks-per-session", "2"});
  std::vector<std::string> tokens;
  for (const char* resource : {"l/1", "l/2"}) {
    Client c = agent.Connect();  // each from its own connection, closed at once
    const json granted = Detach(c, resource, 60'000);
    ASSERT_TRUE(granted.value("ok", false)) << granted;
    tokens.push_back(granted["token"].get<std::string>());
  }
  Client c = agent.Connect();
  const json refused = Detach(c, "l/3", 60'000);
  EXPECT_EQ(Code(refused), "too_many") << refused;
  EXPECT_THAT(refused.value("message", ""), HasSubstr("max_locks_per_session = 2"));
  EXPECT_EQ(MetricNow(agent.admin_port(), "lockwarden_limit_refusals_total",
                      {{"limit", "detached_per_uid"}}),
            1);
  EXPECT_TRUE(c.Acquire("l/4", 60'000, 0).value("ok", false))
      << "this connection's own locks are not its uid's leases";

  ASSERT_TRUE(c.Release("l/1", tokens[0]).value("ok", false));
  // An awaited detached acquire counts as well: one held, one waiting for l/4.
  Client waiting = agent.Connect();
  waiting.SendRaw(R"({"id":1,"op":"acquire","resource":"l/4","wait_ms":60000,"detach":true})"
                  "\n");
  ASSERT_EQ(StateWhen(agent, [](const json& s) { return s.value("waiters", 0) == 1; })["waiters"],
            1);
  EXPECT_EQ(Code(Detach(c, "l/5", 60'000)), "too_many");
  waiting.Close();  // drops its wait
  ASSERT_EQ(StateWhen(agent, [](const json& s) { return s.value("waiters", 1) == 0; })["waiters"],
            0);
  EXPECT_TRUE(Detach(c, "l/5", 60'000).value("ok", false));
}

TEST_F(DetachedTest, ItsWaitBelongsToTheAcquiringConnection) {
  AgentProcess agent(cluster_);
  Client holder = agent.Connect();
  const json held = holder.Acquire("q", 60'000, 0);
  ASSERT_TRUE(held.value("ok", false));
  Client waiting = agent.Connect();
  waiting.SendRaw(R"({"id":1,"op":"acquire","resource":"q","wait_ms":60000,"detach":true})"
                  "\n");
  ASSERT_EQ(StateWhen(agent, [](const json& s) { return s.value("waiters", 0) == 1; })["waiters"],
            1);
  waiting.Close();
  ASSERT_EQ(StateWhen(agent, [](const json& s) { return s.value("waiters", 1) == 0; })["waiters"],
            0);
  ASSERT_TRUE(holder.Release("q", held["token"].get<std::string>()).value("ok", false));
  // Had the wait outlived its connection, the release would have handed q to it.
  Client next = agent.Connect();
  EXPECT_TRUE(next.Acquire("q", 5'000, 0).value("ok", false));
}

TEST_F(DetachedTest, ShutdownLeavesItOnTheMastersForAnyAgentToEnd) {
  std::string lease;
  {
    // A stop for good: it releases a connection's locks, never a detached lease.
    AgentProcess agent(cluster_, {"--release-on-stop", "true"});
    lease = AcquireByCli(agent, "s/lease");
    Client c = agent.Connect();
    ASSERT_TRUE(c.Acquire("s/owned", 60'000, 0).value("ok", false));
    agent.Signal(SIGTERM);
    ASSERT_EQ(agent.WaitExit(milliseconds(15'000)), 0) << agent.Log();
  }
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("s/lease"), lease, 3), 3);
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("s/owned")), 0) << "a connection's lock is released";

  AgentProcess other(cluster_);  // another socket: another agent id
  Client c = other.Connect();
  EXPECT_EQ(Code(c.Acquire("s/lease", 5'000, 0)), "timeout") << "it still excludes";
  const json extended = c.Extend("s/lease", lease, 10'000);
  ASSERT_TRUE(extended.value("ok", false)) << extended << other.Log();
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("s/lease"), lease, 3), 3);
  EXPECT_TRUE(c.Release("s/lease", lease).value("ok", false));
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("s/lease")), 0);
  EXPECT_EQ(Code(c.Extend("s/lease", lease, 10'000)), "not_held");
}

TEST_F(DetachedTest, CommandLineRoundTrip) {
  AgentProcess agent(cluster_);
  const Ran fenced = Cli(agent, {"acquire", "--detach", "--fence", "--ttl", "10s", "jobs/f"});
  ASSERT_EQ(fenced.exit_code, 0) << fenced.output;
  const std::string line = Trimmed(fenced.output);
  ASSERT_EQ(line.size(), 42u) << "TOKEN FENCE: " << line;
  const std::string token = line.substr(0, 40);
  EXPECT_GE(std::stoll(line.substr(41)), 1);

  const Ran busy = Cli(agent, {"acquire", "--detach", "--wait", "0s", "jobs/f"});
  EXPECT_EQ(busy.exit_code, 75) << busy.output;
  EXPECT_THAT(busy.output, HasSubstr("timeout"));

  const Ran as_json = Cli(agent, {"acquire", "--detach", "--json", "jobs/g"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.output;
  const json reply = json::parse(as_json.output);
  EXPECT_EQ(reply["resource"], "jobs/g");
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("jobs/g"), reply["token"].get<std::string>(), 3), 3);
  EXPECT_GT(reply["validity_ms"].get<int64_t>(), 0);

  const Ran extended = Cli(agent, {"extend", "--json", "jobs/f", token, "--ttl", "30s"});
  ASSERT_EQ(extended.exit_code, 0) << extended.output;
  EXPECT_GT(json::parse(extended.output)["validity_ms"].get<int64_t>(), 10'000);
  const Ran released = Cli(agent, {"release", "--json", "jobs/f", token});
  ASSERT_EQ(released.exit_code, 0) << released.output;
  EXPECT_EQ(json::parse(released.output)["ok"], true);
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("jobs/f")), 0);
  EXPECT_EQ(Cli(agent, {"extend", "jobs/f", token}).exit_code, 72);

  const Ran no_detach = Cli(agent, {"acquire", "jobs/h"});
  EXPECT_EQ(no_detach.exit_code, 64) << no_detach.output;
  EXPECT_THAT(no_detach.output, HasSubstr("--detach"));
  const Ran bad_token = Cli(agent, {"release", "jobs/g", "xyz"});
  EXPECT_EQ(bad_token.exit_code, 64) << bad_token.output;
  EXPECT_THAT(bad_token.output, HasSubstr("bad_request"));
}

}  // namespace
}  // namespace lw::test::detached
