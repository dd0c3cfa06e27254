// The fleet view with real agents over real masters: three agents with distinct names on the
// same five masters; a lock held through B and a waiter queued at A are both seen from C, with
// the holder's pid and command and the waiter's agent; C revokes it, B's client is told and A's
// waiter is granted through the release announcement; B killed -9 leaves the registry within
// its heartbeat ttl and its locks show "gone"; an agent with another max_ttl_ms is flagged.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include <gtest/gtest.h>

#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::fleet {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kToken = "fleet-test-token-0123456789abcdef";
// Short enough that a killed agent's entry goes within the test, long enough that a loaded box
// never misses a heartbeat (three per ttl).
constexpr int64_t kHeartbeatTtlMs = 4'000;
// A's retry timer (the longest allowed), longer than the test can take from queueing A's waiter
// to its grant (the awaits before the revoke end within 30 s): a grant before it could fire came
// from the release announcement, not from a retry.
constexpr int64_t kRetryDelayMs = 60'000;

std::vector<std::string> AgentArgs(const std::string& name, const std::string& token_path,
                                   std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--agent-name", name,
                                   "--heartbeat-ttl-ms", std::to_string(kHeartbeatTtlMs),
                                   "--fleet-refresh-ms", "1000",
                                   "--admin-token-file", token_path};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

class FleetTest : public ::testing::Test {
 protected:
  ~FleetTest() override { std::filesystem::remove_all(dir_); }

  static json Fleet(const AgentProcess& agent, const std::string& query = "") {
    HttpResult r = HttpGet(agent.admin_port(), "/api/v1/fleet" + query);
    if (r.status != 200) return json{{"status", r.status}, {"body", r.body}};
    return json::parse(r.body);
  }

  // The row of `resource` in agent's fleet view once `ready` says it is as expected.
  static std::optional<json> AwaitRow(const AgentProcess& agent, const std::string& resource,
                                      const std::function<bool(const json&)>& ready) {
    std::optional<json> found;
    Eventually(
        [&] {
          const json view = Fleet(agent);
          for (const json& row : view.value("locks", json::array())) {
            if (row.value("resource", "") == resource && ready(row)) {
              found = row;
              return true;
            }
          }
          return false;
        },
        milliseconds(30'000));
    return found;
  }

  static std::optional<json> AgentNamed(const json& view, const std::string& name) {
    for (const json& a : view.value("agents", json::array())) {
      if (a.value("name", "") == name) return a;
    }
    return std::nullopt;
  }

  // The id of the agent whose grant the key of `resource` holds, from the value on master 0.
  std::string HolderIdOf(const std::string& resource) const {
    const auto value = cluster_.Get(0, KeyOf(resource));
    if (!value) return "";
    return value->substr(0, value->find(':'));
  }

  std::string dir_ = MakeTempDir("lw-fleet-");
  std::string token_path_ = WriteFile(dir_ + "/token", kToken);
  RedisCluster cluster_{5};
  AgentProcess a_{cluster_,
                  AgentArgs("agent-a", token_path_,
                            {"--retry-delay-ms", std::to_string(kRetryDelayMs),
                             "--retry-jitter-ms", "0"})};
  AgentProcess b_{cluster_, AgentArgs("agent-b", token_path_)};
  AgentProcess c_{cluster_, AgentArgs("agent-c", token_path_)};
};

TEST_F(FleetTest, OperatorOnCSeesHolderOnBAndWaiterOnAThenRevokesAndTheWaiterGetsIt) {
  auto holder = b_.Connect();
  const json grant = holder.Acquire("fleet:job", 60'000, 1'000, /*renew=*/true);
  ASSERT_TRUE(grant.value("ok", false)) << grant;
  const std::string token = grant["token"];
  const std::string b_id = HolderIdOf("fleet:job");
  ASSERT_EQ(b_id.size(), 16u) << "the key's value names the holder's agent";
  EXPECT_EQ(cluster_.Get(0, KeyOf("fleet:job")), b_id + ":" + token);

  auto waiter = a_.Connect();
  const auto queued_at = SteadyClock::now();  // A's first attempt, and so its retry, come after
  waiter.SendRaw(R"({"id":9,"op":"acquire","resource":"fleet:job","ttl_ms":10000,)"
                 R"("wait_ms":60000})"
                 "\n");

  // C sees the holder (through B's report: its pid and command) and A's waiter, with its wait
  // age. The two reports reach the masters on their agents' own heartbeats: await both.
  auto row = AwaitRow(c_, "fleet:job", [](const json& r) {
    return r["holder"].value("pid", -1) > 0 && r["masters"].size() == 5 &&
           !r.value("waiters", json::array()).empty() &&
           r["waiters"][0].value("waited_ms", 0) > 0;
  });
  ASSERT_TRUE(row.has_value()) << Fleet(c_).dump(2);
  // Every answer says how old its read is (an older one is answered rather than waited for).
  const json view = Fleet(c_);
  ASSERT_TRUE(view.contains("age_ms") && view["age_ms"].is_number_integer()) << view.dump(1);
  EXPECT_GE(view["age_ms"].get<int64_t>(), 0);
  // A fleet this small is one read of the default budget: a whole view, no sweep left over.
  EXPECT_EQ(view.value("reads", 0), 1) << view.dump(1);
  EXPECT_EQ(view.value("partial", true), false);
  EXPECT_GT(view.value("keys_walked", 0), 0);
  EXPECT_LE(view.value("read_started_at_ms", int64_t{0}), view.value("read_at_ms", int64_t{0}));
  EXPECT_TRUE(view.contains("sweep") && view["sweep"].is_null()) << view.dump(1);
  const json& h = (*row)["holder"];
  EXPECT_EQ(h["state"], "live");
  EXPECT_EQ(h["agent_name"], "agent-b");
  EXPECT_EQ(h["agent_id"], b_id);
  EXPECT_EQ(h["pid"], static_cast<int>(getpid())) << "the holder is this test process";
  EXPECT_NE(h.value("cmdline", "").find("lw_integration_tests"), std::string::npos) << h;
  EXPECT_TRUE(h.value("renew", false));
  EXPECT_EQ((*row)["masters"].size(), 5u);
  EXPECT_TRUE((*row).value("quorum", false));
  const json& w = (*row)["waiters"][0];
  EXPECT_EQ(w["agent_name"], "agent-a");
  EXPECT_EQ(w["pid"], static_cast<int>(getpid()));
  EXPECT_EQ(row->dump().find(token), std::string::npos) << "a token in the fleet view";

  // A also lists its own waiter.
  const json a_state = json::parse(HttpGet(a_.admin_port(), "/api/v1/state").body);
  ASSERT_EQ(a_state["waiter_list"].size(), 1u) << a_state;
  EXPECT_EQ(a_state["waiter_list"][0]["resource"], "fleet:job");

  // The revoke needs the token; with it, C tells B, B's client loses the lock.
  const std::string body = json{{"resource", "fleet:job"}}.dump();
  EXPECT_EQ(HttpPost(c_.admin_port(), "/api/v1/fleet/revoke", body).status, 401);
  ASSERT_EQ(cluster_.AwaitHolding(KeyOf("fleet:job"), b_id + ":" + token, 5), 5);
  const auto revoked_at = SteadyClock::now();
  HttpResult done = HttpPost(c_.admin_port(), "/api/v1/fleet/revoke", body,
                             {{"Authorization", "Bearer " + kToken}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(json::parse(done.body)["how"], "holder_agent") << done.body;

  auto lost = holder.NextEvent(milliseconds(10'000));
  ASSERT_TRUE(lost.has_value()) << "the holder was not told";
  EXPECT_EQ((*lost)["event"], "lost");
  EXPECT_EQ((*lost)["reason"], "revoked");

  // A's waiter is granted through the release announcement: its retry timer is 30 s.
  std::optional<json> next;
  ASSERT_TRUE(Eventually(
      [&] {
        auto line = waiter.ReadLine(milliseconds(200));
        if (line) next = json::parse(*line);
        return line.has_value();
      },
      milliseconds(kRetryDelayMs)))
      << "A's waiter was not granted";
  EXPECT_EQ((*next)["id"], 9);
  EXPECT_TRUE(next->value("ok", false)) << *next;
  EXPECT_LT(MsSince(queued_at), kRetryDelayMs) << "granted by a retry, not by the announcement";
  std::printf("fleet revoke: A's waiter granted %.0f ms after the revoke was sent\n",
              MsSince(revoked_at));
  EXPECT_NE(c_.Log().find("audit: fleet_revoke"), std::string::npos) << c_.Log();
}

json AcquireKind(client::Client& c, const std::string& resource, json extra) {
  json request = {{"op", "acquire"}, {"resource", resource}, {"ttl_ms", 60'000}, {"wait_ms", 0},
                  {"renew", true}};
  request.update(extra);
  return c.Call(request);
}

// The rows of `resource` in agent's fleet view once there are `n` of them, each from a report.
std::vector<json> AwaitRows(const AgentProcess& agent, const std::string& resource, size_t n) {
  std::vector<json> rows;
  Eventually(
      [&] {
        rows.clear();
        HttpResult r = HttpGet(agent.admin_port(), "/api/v1/fleet");
        if (r.status != 200) return false;
        for (const json& row : json::parse(r.body).value("locks", json::array())) {
          if (row.value("resource", "") == resource) rows.push_back(row);
        }
        return rows.size() == n && std::all_of(rows.begin(), rows.end(), [](const json& row) {
                 return row["holder"].value("pid", -1) > 0 && row.value("quorum", false);
               });
      },
      milliseconds(30'000));
  return rows;
}

TEST_F(FleetTest, PermitsAndReadHoldsOfTwoAgentsAreShownAndAReadHoldIsRevoked) {
  auto pa = a_.Connect(), pb = b_.Connect(), ra = a_.Connect(), rb = b_.Connect();
  ASSERT_TRUE(AcquireKind(pa, "fleet:pool", {{"permits", 3}}).value("ok", false));
  ASSERT_TRUE(AcquireKind(pb, "fleet:pool", {{"permits", 3}}).value("ok", false));
  ASSERT_TRUE(AcquireKind(ra, "fleet:cfg", {{"shared", true}}).value("ok", false));
  const json b_read = AcquireKind(rb, "fleet:cfg", {{"shared", true}});
  ASSERT_TRUE(b_read.value("ok", false)) << b_read;

  const std::vector<json> permits = AwaitRows(c_, "fleet:pool", 2);
  ASSERT_EQ(permits.size(), 2u) << Fleet(c_).dump(2);
  std::set<int> seen;
  for (const json& row : permits) {
    EXPECT_EQ(row["mode"], "permit") << row;
    EXPECT_EQ(row["permits"], 3) << row;
    EXPECT_EQ(row["shape"]["kind"], "semaphore");
    EXPECT_EQ(row["shape"]["permits_held"], 2);
    seen.insert(row["permit"].get<int>());
  }
  EXPECT_EQ(seen.size(), 2u) << "two different permits";
  const std::vector<json> readers = AwaitRows(c_, "fleet:cfg", 2);
  ASSERT_EQ(readers.size(), 2u) << Fleet(c_).dump(2);
  json b_row;
  for (const json& row : readers) {
    EXPECT_EQ(row["mode"], "shared") << row;
    EXPECT_EQ(row["shape"]["readers"], 2);
    EXPECT_FALSE(row["shape"]["writer"].get<bool>());
    if (row["holder"]["agent_name"] == "agent-b") b_row = row;
  }
  ASSERT_TRUE(b_row.is_object()) << "B's reader is in the view";
  EXPECT_EQ(Fleet(c_).dump().find(b_read["token"].get<std::string>()), std::string::npos);

  // C revokes B's read hold, named by its hold id: B's client is told, A's reader stays.
  const std::string body =
      json{{"resource", "fleet:cfg"}, {"hold", b_row["hold_id"]}}.dump();
  HttpResult done = HttpPost(c_.admin_port(), "/api/v1/fleet/revoke", body,
                             {{"Authorization", "Bearer " + kToken}});
  ASSERT_EQ(done.status, 200) << done.body;
  const json result = json::parse(done.body);
  EXPECT_EQ(result["how"], "holder_agent") << done.body;
  EXPECT_EQ(result["mode"], "shared") << done.body;
  auto lost = rb.NextEvent(milliseconds(10'000));
  ASSERT_TRUE(lost.has_value()) << "B's reader was not told";
  EXPECT_EQ((*lost)["event"], "lost");
  EXPECT_EQ((*lost)["reason"], "revoked");
  for (int i = 0; i < cluster_.size(); ++i) {
    EXPECT_EQ(cluster_.ZRange(i, "lock:fleet:cfg\x1freaders").size(), 1u) << "master " << i;
  }
  EXPECT_EQ(AwaitRows(c_, "fleet:cfg", 1).size(), 1u) << Fleet(c_).dump(2);

  // A permit is revoked by its index.
  const int permit = permits[0]["permit"];
  const std::string by_permit = json{{"resource", "fleet:pool"}, {"permit", permit}}.dump();
  HttpResult freed = HttpPost(c_.admin_port(), "/api/v1/fleet/revoke", by_permit,
                              {{"Authorization", "Bearer " + kToken}});
  ASSERT_EQ(freed.status, 200) << freed.body;
  EXPECT_EQ(json::parse(freed.body)["permit"], permit) << freed.body;
  EXPECT_EQ(AwaitRows(c_, "fleet:pool", 1).size(), 1u) << Fleet(c_).dump(2);
}

TEST_F(FleetTest, KilledAgentLeavesTheRegistryWithinItsTtlAndItsLocksShowHolderGone) {
  auto holder = b_.Connect();
  const json grant = holder.Acquire("fleet:orphan", 60'000, 1'000, /*renew=*/false);
  ASSERT_TRUE(grant.value("ok", false)) << grant;
  const std::string b_id = HolderIdOf("fleet:orphan");
  ASSERT_TRUE(AwaitRow(c_, "fleet:orphan",
                       [](const json& r) { return r["holder"]["state"] == "live"; }));

  b_.Signal(SIGKILL);
  ASSERT_EQ(b_.WaitExit(milliseconds(10'000)), 128 + SIGKILL);
  // Its entry can only outlive it by what its ttl had left: at most one heartbeat ttl.
  for (int i = 0; i < cluster_.size(); ++i) {
    EXPECT_LE(cluster_.Pttl(i, "lockwarden:agent:" + b_id), kHeartbeatTtlMs) << "master " << i;
  }
  ASSERT_TRUE(Eventually(
      [&] {
        for (int i = 0; i < cluster_.size(); ++i) {
          if (cluster_.Get(i, "lockwarden:agent:" + b_id)) return false;
        }
        return true;
      },
      milliseconds(3 * kHeartbeatTtlMs)));

  // The lock is still on the masters (60 s ttl, nobody to release it): shown as holder gone.
  auto row = AwaitRow(c_, "fleet:orphan",
                      [](const json& r) { return r["holder"]["state"] == "gone"; });
  ASSERT_TRUE(row.has_value()) << Fleet(c_).dump(2);
  EXPECT_EQ((*row)["holder"]["agent_id"], b_id);
  EXPECT_GT((*row).value("validity_ms", 0), 0);
  const json view = Fleet(c_);
  EXPECT_FALSE(AgentNamed(view, "agent-b").has_value()) << view["agents"];
  EXPECT_TRUE(AgentNamed(view, "agent-a").has_value()) << view["agents"];

  // `who` from C: held, by an agent that is gone; the CLI's exit code says held (0) or not (1).
  HttpResult who = HttpGet(c_.admin_port(), "/api/v1/fleet/who?resource=fleet:orphan");
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_NE(who.body.find("gone"), std::string::npos) << who.body;
  const std::string admin = "http://127.0.0.1:" + std::to_string(c_.admin_port());
  const std::string held_out = dir_ + "/who-held.out";
  pid_t pid =
      SpawnTestProcess({LockwardenBinary(), "who", "fleet:orphan", "--admin", admin}, held_out);
  ASSERT_EQ(WaitChild(pid, milliseconds(15'000)), 0) << ReadFile(held_out);
  EXPECT_NE(ReadFile(held_out).find(b_id), std::string::npos) << ReadFile(held_out);
  // Named by its socket, as every client command finds the agent: it says where its API is.
  const std::string free_out = dir_ + "/who-free.out";
  pid = SpawnTestProcess(
      {LockwardenBinary(), "who", "fleet:nobody", "--socket", c_.socket_path()}, free_out);
  EXPECT_EQ(WaitChild(pid, milliseconds(15'000)), 1) << ReadFile(free_out);
  const std::string status_out = dir_ + "/status.out";
  pid = SpawnTestProcess(
      {LockwardenBinary(), "status", "--fleet", "--json", "--socket", c_.socket_path()},
      status_out);
  ASSERT_EQ(WaitChild(pid, milliseconds(15'000)), 0) << ReadFile(status_out);
  const json fleet = json::parse(ReadFile(status_out));
  EXPECT_TRUE(AgentNamed(fleet, "agent-c").has_value()) << fleet["agents"];
  // No agent at that socket: unknown (69), and the message says which socket.
  const std::string nowhere_out = dir_ + "/who-nowhere.out";
  pid = SpawnTestProcess(
      {LockwardenBinary(), "who", "fleet:orphan", "--socket", dir_ + "/nowhere.sock"},
      nowhere_out);
  EXPECT_EQ(WaitChild(pid, milliseconds(15'000)), 69) << ReadFile(nowhere_out);
  EXPECT_NE(ReadFile(nowhere_out).find("nowhere.sock"), std::string::npos)
      << ReadFile(nowhere_out);

  // Revoke of a lock whose agent is gone: compare-and-deleted from C.
  HttpResult done = HttpPost(c_.admin_port(), "/api/v1/fleet/revoke",
                             json{{"resource", "fleet:orphan"}}.dump(),
                             {{"Authorization", "Bearer " + kToken}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(json::parse(done.body)["how"], "deleted") << done.body;
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("fleet:orphan")), 0);
}

TEST_F(FleetTest, AnAgentWithAnotherMaxTtlIsFlaggedAsDrift) {
  AgentProcess drifted{cluster_, AgentArgs("agent-d", token_path_, {"--max-ttl-ms", "30000"})};
  std::optional<json> d;
  ASSERT_TRUE(Eventually(
      [&] {
        d = AgentNamed(Fleet(a_), "agent-d");
        return d.has_value();
      },
      milliseconds(30'000)));
  const json drift = d->value("drift", json::array());
  ASSERT_EQ(drift.size(), 1u) << *d;
  EXPECT_NE(drift[0].get<std::string>().find("max_ttl_ms"), std::string::npos) << drift;
  const auto b = AgentNamed(Fleet(a_), "agent-b");
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->value("drift", json::array()).empty()) << *b;
}

TEST_F(FleetTest, ALockAcquiredSinceItsAgentsLastHeartbeatShowsItsHolderOnThatAgentAtOnce) {
  // D heartbeats every 100 s: the holder report it wrote at start lists none of this test's
  // locks for longer than the test takes.
  AgentProcess d{cluster_, {"--agent-name", "agent-d", "--heartbeat-ttl-ms", "300000",
                            "--fleet-refresh-ms", "1000", "--admin-token-file", token_path_}};
  auto client = d.Connect();
  ASSERT_TRUE(client.Acquire("fleet:fresh", 60'000, 0, /*renew=*/true).value("ok", false));
  // Another agent knows only the report: no holder detail (the premise of this test).
  auto elsewhere = AwaitRow(c_, "fleet:fresh", [](const json&) { return true; });
  ASSERT_TRUE(elsewhere.has_value()) << Fleet(c_).dump(2);
  EXPECT_EQ((*elsewhere)["holder"].value("pid", -1), -1) << *elsewhere;
  // D itself fills its own row from what its loop holds.
  auto own = AwaitRow(d, "fleet:fresh", [](const json& r) { return r["holder"]["state"] == "live"; });
  ASSERT_TRUE(own.has_value()) << Fleet(d).dump(2);
  const json& h = (*own)["holder"];
  EXPECT_EQ(h.value("pid", -1), static_cast<int>(getpid())) << h;
  EXPECT_NE(h.value("cmdline", "").find("lw_integration_tests"), std::string::npos) << h;
  EXPECT_TRUE(h.value("renew", false)) << h;
  EXPECT_EQ(h.value("ttl_ms", 0), 60'000) << h;
  HttpResult who = HttpGet(d.admin_port(), "/api/v1/fleet/who?resource=fleet:fresh");
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_EQ(json::parse(who.body)["holder"].value("pid", -1), static_cast<int>(getpid()))
      << who.body;
}

}  // namespace
}  // namespace lw::test::fleet
