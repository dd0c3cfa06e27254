// The leak scanner against real masters: what it reports (and what it must not), the guarded
// remedies behind the admin token, and the one-shot `lockwarden scan`.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/lock_kind.h"
#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::scanner {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kToken = "test-admin-token-0123456789";

std::string Master(const RedisCluster& c, int i) {
  return "127.0.0.1:" + std::to_string(c.port(i));
}

json Leaks(int port) {
  HttpResult r = HttpGet(port, "/api/v1/leaks");
  return r.status == 200 ? json::parse(r.body) : json::object();
}

// The finding for (master, key), or null.
json FindLeak(const json& leaks, const std::string& master, const std::string& key) {
  for (const auto& leak : leaks.value("leaks", json::array())) {
    if (leak["master"] == master && leak["key"] == key) return leak;
  }
  return nullptr;
}

int64_t UnixMsNow() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The report of a scan pass that started after this call (so it saw what was planted before).
json FreshLeaks(int port) {
  const int64_t now = UnixMsNow();
  json leaks;
  const bool fresh = Eventually(
      [&] {
        leaks = Leaks(port);
        const json pass = leaks.value("last_pass", json());
        return pass.is_object() && pass.value("started_unix_ms", int64_t{0}) > now;
      },
      milliseconds(10'000));
  EXPECT_TRUE(fresh) << "no scan pass completed within 10 s: " << leaks;
  return leaks;
}

HttpHeaders Bearer(const std::string& token = kToken) {
  return {{"Authorization", "Bearer " + token}};
}

class ScannerTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{5};
};

TEST_F(ScannerTest, ReportsLeakedSuspiciousAndPartialKeysButNeverALiveLock) {
  AgentProcess agent(cluster_, {"--scan-interval-ms", "200", "--max-ttl-ms", "60000"});
  const int port = agent.admin_port();
  auto client = agent.Connect();
  json live = client.Acquire("live", 50'000, 1'000);
  ASSERT_TRUE(live.value("ok", false)) << live;
  // A live lock that lost copies (a master restarted, say) is short of a quorum but is this
  // agent's grant: never a "partial leftover".
  int removed = 0;
  for (int i = 0; i < cluster_.size() && removed < 3; ++i) {
    const std::optional<std::string> value = cluster_.Get(i, KeyOf("live"));
    if (value && value->ends_with(":" + live["token"].get<std::string>())) {
      cluster_.Set(i, KeyOf("live"), "overwritten-by-test", 1);  // expires at once
      ++removed;
    }
  }
  cluster_.Set(0, "lock:no-ttl", "x", 0);
  cluster_.Set(1, "lock:long-ttl", "x", 600'000);
  cluster_.Set(2, "lock:partial", "a-failed-attempt", 50'000);
  cluster_.Set(3, "lock:partial", "a-failed-attempt", 50'000);
  cluster_.Set(4, "other:no-ttl", "not a lock key", 0);  // not scanned: no pattern covers it

  const json leaks = FreshLeaks(port);
  const json no_ttl = FindLeak(leaks, Master(cluster_, 0), "lock:no-ttl");
  ASSERT_TRUE(no_ttl.is_object()) << leaks.dump(2);
  EXPECT_EQ(no_ttl["type"], "no_ttl");
  EXPECT_EQ(no_ttl["redis_type"], "string");
  EXPECT_EQ(no_ttl["ttl_ms"], -1);
  const json long_ttl = FindLeak(leaks, Master(cluster_, 1), "lock:long-ttl");
  ASSERT_TRUE(long_ttl.is_object()) << leaks.dump(2);
  EXPECT_EQ(long_ttl["type"], "ttl_above_max");
  for (int i : {2, 3}) {
    const json partial = FindLeak(leaks, Master(cluster_, i), "lock:partial");
    ASSERT_TRUE(partial.is_object()) << leaks.dump(2);
    EXPECT_EQ(partial["type"], "partial");
    EXPECT_EQ(partial["copies"], 2);
  }
  for (const auto& leak : leaks["leaks"]) {
    EXPECT_NE(leak["key"], KeyOf("live")) << "a live grant reported: " << leak;
    EXPECT_NE(leak["key"], "other:no-ttl") << leak;
  }
  EXPECT_EQ(leaks["leaks"].size(), 4u) << leaks.dump(2);

  EXPECT_TRUE(Eventually(
      [&] {
        return MetricNow(port, "lockwarden_scan_leaked_keys",
                         {{"master", Master(cluster_, 0)}, {"finding", "no_ttl"}}) == 1 &&
               MetricNow(port, "lockwarden_scan_leaked_keys",
                         {{"master", Master(cluster_, 2)}, {"finding", "partial"}}) == 1;
      },
      milliseconds(5000)));
  // First seen stays put across passes.
  const int64_t first_seen = no_ttl["first_seen_unix_ms"];
  const json later = FreshLeaks(port);
  EXPECT_EQ(FindLeak(later, Master(cluster_, 0), "lock:no-ttl")["first_seen_unix_ms"],
            first_seen);
}

TEST_F(ScannerTest, ExtraPatternsAuditOtherKeysOnce) {
  AgentProcess agent(cluster_, {"--scan-interval-ms", "200", "--scan-pattern", "*"});
  cluster_.Set(0, "cache:forever", "x", 0);
  cluster_.Set(0, "lock:forever", "x", 0);
  cluster_.Set(0, "cache:fine", "x", 60'000);
  const json leaks = FreshLeaks(agent.admin_port());
  EXPECT_TRUE(FindLeak(leaks, Master(cluster_, 0), "cache:forever").is_object()) << leaks;
  int lock_findings = 0;
  for (const auto& leak : leaks["leaks"]) lock_findings += leak["key"] == "lock:forever";
  EXPECT_EQ(lock_findings, 1) << "a lock key matched by two patterns is one finding";
  EXPECT_FALSE(FindLeak(leaks, Master(cluster_, 0), "cache:fine").is_object());
}

TEST_F(ScannerTest, RemediesNeedTheTokenASameOriginRequestAndAStillTtlLessKey) {
  const std::string dir = MakeTempDir("lw-token-");
  AgentProcess agent(cluster_, {"--scan-interval-ms", "200", "--admin-token-file",
                                WriteFile(dir + "/admin.token", kToken + "\n")});
  const int port = agent.admin_port();
  cluster_.Set(0, "lock:leak-a", "x", 0);
  cluster_.Set(1, "lock:leak-b", "x", 0);
  ASSERT_TRUE(FindLeak(FreshLeaks(port), Master(cluster_, 0), "lock:leak-a").is_object());
  const std::string expire =
      json{{"master", Master(cluster_, 0)}, {"key", "lock:leak-a"}, {"ttl_ms", 30'000}}.dump();

  EXPECT_EQ(HttpPost(port, "/api/v1/leaks/expire", expire).status, 401);
  EXPECT_EQ(HttpPost(port, "/api/v1/leaks/expire", expire, Bearer("wrong-token")).status, 401);
  HttpHeaders cross = Bearer();
  cross.emplace("Sec-Fetch-Site", "cross-site");
  EXPECT_EQ(HttpPost(port, "/api/v1/leaks/expire", expire, cross).status, 403);
  HttpHeaders foreign = Bearer();
  foreign.emplace("Origin", "http://evil.example");
  EXPECT_EQ(HttpPost(port, "/api/v1/leaks/expire", expire, foreign).status, 403);
  EXPECT_EQ(cluster_.Pttl(0, "lock:leak-a"), -1) << "a refused action changed the key";

  for (const std::string& bad :
       {std::string("not json"), json{{"master", Master(cluster_, 0)}}.dump(),
        json{{"master", "10.9.9.9:1"}, {"key", "lock:leak-a"}, {"ttl_ms", 1}}.dump(),
        json{{"master", Master(cluster_, 0)}, {"key", "lock:leak-a"}, {"ttl_ms", 0}}.dump(),
        json{{"master", Master(cluster_, 0)}, {"key", "lock:leak-a"}, {"ttl", 5}}.dump()}) {
    HttpResult r = HttpPost(port, "/api/v1/leaks/expire", bad, Bearer());
    EXPECT_EQ(r.status, 400) << bad << " -> " << r.body;
    EXPECT_EQ(json::parse(r.body)["error"], "bad_request") << r.body;
  }

  HttpResult done = HttpPost(port, "/api/v1/leaks/expire", expire, Bearer());
  ASSERT_EQ(done.status, 200) << done.body;
  const int64_t pttl = cluster_.Pttl(0, "lock:leak-a");
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 30'000);
  EXPECT_FALSE(FindLeak(Leaks(port), Master(cluster_, 0), "lock:leak-a").is_object())
      << "a remedied key is dropped from the report at once";
  HttpResult again = HttpPost(port, "/api/v1/leaks/expire", expire, Bearer());
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(json::parse(again.body)["error"], "stale");

  // The key became a real lock (with a TTL) since the scan: delete must not touch it.
  cluster_.Set(1, "lock:leak-b", "now-a-live-token", 60'000);
  const std::string del = json{{"master", Master(cluster_, 1)}, {"key", "lock:leak-b"}}.dump();
  EXPECT_EQ(HttpPost(port, "/api/v1/leaks/delete", del, Bearer()).status, 409);
  EXPECT_EQ(cluster_.Get(1, "lock:leak-b"), "now-a-live-token");
  cluster_.Set(1, "lock:leak-b", "x", 0);
  EXPECT_EQ(HttpPost(port, "/api/v1/leaks/delete", del, Bearer()).status, 200);
  EXPECT_EQ(cluster_.Pttl(1, "lock:leak-b"), -2);

  const std::string log = agent.Log();
  EXPECT_NE(log.find("audit: expire_key master=" + Master(cluster_, 0) +
                     " key=\"lock:leak-a\" ttl_ms=30000"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("audit: expire_key refused"), std::string::npos) << log;
  EXPECT_GE(MetricNow(port, "lockwarden_admin_actions_total",
                      {{"action", "expire_key"}, {"result", "refused"}}),
            4);
  EXPECT_EQ(MetricNow(port, "lockwarden_admin_actions_total",
                      {{"action", "delete_key"}, {"result", "done"}}),
            1);
  std::filesystem::remove_all(dir);
}

json AcquireKind(client::Client& c, const std::string& resource, json extra) {
  json request = {{"op", "acquire"}, {"resource", resource}, {"ttl_ms", 30'000}, {"wait_ms", 0}};
  request.update(extra);
  return c.Call(request);
}

// PERSIST key on master i (through EVAL: the cluster's Run wants a status reply).
void Persist(RedisCluster& cluster, int i, const std::string& key) {
  cluster.Run(i, {"EVAL", "redis.call('persist', KEYS[1]) return {ok='OK'}", "1", key});
}

TEST_F(ScannerTest, HealthySemaphoresAndReadersAreNoFindingsButTtlLessPartsAre) {
  const std::string dir = MakeTempDir("lw-kinds-");
  AgentProcess agent(cluster_, {"--scan-interval-ms", "200", "--max-ttl-ms", "60000",
                                "--admin-token-file",
                                WriteFile(dir + "/admin.token", kToken + "\n")});
  const int port = agent.admin_port();
  auto p1 = agent.Connect(), p2 = agent.Connect(), r1 = agent.Connect(), r2 = agent.Connect(),
       w = agent.Connect();
  const json permit = AcquireKind(p1, "pool", {{"permits", 3}});
  ASSERT_TRUE(permit.value("ok", false)) << permit;
  ASSERT_TRUE(AcquireKind(p2, "pool", {{"permits", 3}}).value("ok", false));
  ASSERT_TRUE(AcquireKind(r1, "cfg", {{"shared", true}}).value("ok", false));
  ASSERT_TRUE(AcquireKind(r2, "cfg", {{"shared", true}}).value("ok", false));
  // A writer refused because of the readers leaves its writer-waiting mark (with a PX).
  EXPECT_FALSE(AcquireKind(w, "cfg", json::object()).value("ok", false));

  const json healthy = FreshLeaks(port);
  EXPECT_TRUE(healthy["leaks"].empty()) << healthy.dump(2);
  for (const auto& m : healthy["last_pass"]["masters"]) EXPECT_TRUE(m.value("ok", false)) << m;
  EXPECT_TRUE(healthy["last_pass"].value("partial_checked", false)) << healthy.dump(2);

  const std::string marker = "lock:pool";
  const std::string permit_key = PermitKey("lock:", "pool", permit["permit"].get<int>());
  const std::string readers = ReadersKey("lock:", "cfg");
  const std::string waiting = WriterWaitingKey("lock:", "cfg");
  ASSERT_TRUE(cluster_.Get(0, marker).has_value());
  Persist(cluster_, 0, marker);
  ASSERT_TRUE(cluster_.Get(1, permit_key).has_value());
  Persist(cluster_, 1, permit_key);
  ASSERT_FALSE(cluster_.ZRange(2, readers).empty());
  Persist(cluster_, 2, readers);
  cluster_.Set(3, waiting, "0123456789abcdef:left-behind", 0);
  cluster_.Set(4, marker, *cluster_.Get(0, marker), 600'000);

  const json leaks = FreshLeaks(port);
  const struct {
    int master;
    std::string key, type, redis_type;
  } expected[] = {{0, marker, "no_ttl", "string"},
                  {1, permit_key, "no_ttl", "string"},
                  {2, readers, "no_ttl", "zset"},
                  {3, waiting, "no_ttl", "string"},
                  {4, marker, "ttl_above_max", "string"}};
  for (const auto& e : expected) {
    const json found = FindLeak(leaks, Master(cluster_, e.master), e.key);
    ASSERT_TRUE(found.is_object()) << e.key << " on " << e.master << ": " << leaks.dump(2);
    EXPECT_EQ(found["type"], e.type) << found;
    EXPECT_EQ(found["redis_type"], e.redis_type) << found;
  }
  EXPECT_EQ(leaks["leaks"].size(), 5u) << leaks.dump(2);

  // The remedies work on every shape: the readers set gets a TTL (its readers stay), the
  // leaked writer-waiting mark is deleted.
  const json expire =
      json{{"master", Master(cluster_, 2)}, {"key", readers}, {"ttl_ms", 30'000}};
  ASSERT_EQ(HttpPost(port, "/api/v1/leaks/expire", expire.dump(), Bearer()).status, 200);
  EXPECT_GT(cluster_.Pttl(2, readers), 0);
  EXPECT_EQ(cluster_.ZRange(2, readers).size(), 2u);
  const json del = json{{"master", Master(cluster_, 3)}, {"key", waiting}};
  ASSERT_EQ(HttpPost(port, "/api/v1/leaks/delete", del.dump(), Bearer()).status, 200);
  EXPECT_EQ(cluster_.Pttl(3, waiting), -2);
  std::filesystem::remove_all(dir);
}

TEST_F(ScannerTest, ActionsAreDisabledWithoutAToken) {
  AgentProcess agent(cluster_);
  cluster_.Set(0, "lock:leak", "x", 0);
  HttpResult r = HttpPost(agent.admin_port(), "/api/v1/leaks/delete",
                          json{{"master", Master(cluster_, 0)}, {"key", "lock:leak"}}.dump(),
                          Bearer());
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("admin_token_file"), std::string::npos) << r.body;
  EXPECT_EQ(cluster_.Pttl(0, "lock:leak"), -1);
}

TEST_F(ScannerTest, OneShotScanCommandExitsNonZeroOnLeaks) {
  const std::string dir = MakeTempDir("lw-scan-");
  int runs = 0;
  auto scan = [&](std::vector<std::string> extra) {
    const std::string out = dir + "/scan" + std::to_string(++runs) + ".out";
    std::vector<std::string> argv = {LockwardenBinary(), "scan", "--json"};
    for (int i = 0; i < cluster_.size(); ++i) {
      argv.push_back("--master");
      argv.push_back(cluster_.url(i));
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    const pid_t pid = SpawnTestProcess(argv, out);
    const int rc = WaitChild(pid, milliseconds(10'000));
    return std::make_pair(rc, ReadFile(out));
  };
  auto [clean_rc, clean] = scan({});
  EXPECT_EQ(clean_rc, 0) << clean;
  EXPECT_TRUE(json::parse(clean)["leaks"].empty()) << clean;

  cluster_.Set(3, "lock:forgotten", "x", 0);
  auto [leak_rc, leaked] = scan({});
  EXPECT_EQ(leak_rc, 1) << leaked;
  const json report = json::parse(leaked);
  ASSERT_EQ(report["leaks"].size(), 1u) << leaked;
  EXPECT_EQ(report["leaks"][0]["master"], Master(cluster_, 3));
  EXPECT_EQ(report["leaks"][0]["key"], "lock:forgotten");

  cluster_.Set(3, "lock:forgotten", "x", 60'000);
  cluster_.Kill(4);
  auto [down_rc, down] = scan({"--connect-timeout-ms", "200"});
  EXPECT_EQ(down_rc, 69) << down;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lw::test::scanner
