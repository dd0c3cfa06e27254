// Force-release through the admin API: the holder is told, the keys go from every master, the
// next waiter gets the lock; refused without the token.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::force_release {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kToken = "force-release-token-0123456789";

class ForceReleaseTest : public ::testing::Test {
 protected:
  ~ForceReleaseTest() override { std::filesystem::remove_all(dir_); }

  HttpResult Revoke(const std::string& body, const std::string& token = kToken) {
    HttpHeaders headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    return HttpPost(agent_.admin_port(), "/api/v1/locks/release", body, headers);
  }

  std::string dir_ = MakeTempDir("lw-revoke-");
  std::string token_path_ = WriteFile(dir_ + "/token", kToken);
  RedisCluster cluster_{5};
  AgentProcess agent_{cluster_, {"--admin-token-file", token_path_}};
};

TEST_F(ForceReleaseTest, HolderIsToldKeysGoAndTheNextWaiterGetsIt) {
  auto holder = agent_.Connect();
  json grant = holder.Acquire("stuck", 60'000, 1'000, /*renew=*/true);
  ASSERT_TRUE(grant.value("ok", false)) << grant;
  const std::string token = grant["token"];
  ASSERT_EQ(cluster_.AwaitHoldingGrant(KeyOf("stuck"), token, 5), 5);
  auto waiter = agent_.Connect();
  waiter.SendRaw(R"({"id":7,"op":"acquire","resource":"stuck","ttl_ms":10000,"wait_ms":10000})"
                 "\n");

  const std::string body = json{{"resource", "stuck"}}.dump();
  EXPECT_EQ(Revoke(body, "").status, 401);
  EXPECT_EQ(Revoke(body, "wrong-token-wrong-token").status, 401);
  EXPECT_EQ(Revoke(R"({"resource":""})").status, 400);
  EXPECT_EQ(Revoke(R"({"resource":"stuck","extra":1})").status, 400);
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("stuck"), token, 5), 5) << "a refused request acted";

  HttpResult done = Revoke(body);
  ASSERT_EQ(done.status, 200) << done.body;
  const json answer = json::parse(done.body);
  EXPECT_EQ(answer["deleted_on"], 5);
  EXPECT_EQ(answer["masters"], 5);
  EXPECT_EQ(answer["pid"], static_cast<int>(getpid()));

  auto lost = holder.NextEvent(milliseconds(10'000));
  ASSERT_TRUE(lost.has_value()) << "the holder was not told";
  EXPECT_EQ((*lost)["event"], "lost");
  EXPECT_EQ((*lost)["resource"], "stuck");
  EXPECT_EQ((*lost)["reason"], "revoked");
  EXPECT_EQ(cluster_.CountHoldingGrant(KeyOf("stuck"), token), 0);

  // The queued waiter is served at once, with a new token.
  json next;
  ASSERT_TRUE(Eventually(
      [&] {
        auto line = waiter.ReadLine(milliseconds(200));
        if (line) next = json::parse(*line);
        return line.has_value();
      },
      milliseconds(10'000)));
  EXPECT_EQ(next["id"], 7);
  EXPECT_TRUE(next.value("ok", false)) << next;
  EXPECT_NE(next.value("token", ""), token);
  // The revoked holder's token is dead: releasing with it is not_held.
  EXPECT_EQ(holder.Release("stuck", token)["error"], "not_held");

  EXPECT_EQ(Revoke(json{{"resource", "nobody-holds-this"}}.dump()).status, 404);
  EXPECT_EQ(MetricNow(agent_.admin_port(), "lockwarden_locks_lost_total",
                      {{"reason", "revoked"}}),
            1);
  EXPECT_NE(agent_.Log().find("audit: force_release resource=\"stuck\""), std::string::npos);
}

// `lockwarden lock a b -- CMD` holds both together: revoking one stops the command (exit 72),
// and the other is let go of with it.
TEST_F(ForceReleaseTest, RevokingOneOfALockCommandsResourcesStopsItAndFreesTheOther) {
  Fifo fifo(dir_ + "/fifo");
  const std::string out = dir_ + "/lock.out";
  const pid_t job = SpawnTestProcess(
      {LockwardenBinary(), "lock", "--socket", agent_.socket_path(), "--kill-grace", "5s",
       "pair:a", "pair:b", "--", "sh", "-c",
       "trap 'echo TERM > " + fifo.path() + "; exit 0' TERM; echo started > " + fifo.path() +
           "; while :; do sleep 0.05; done"},
      out);
  ASSERT_EQ(fifo.ReadLine(milliseconds(15'000)), "started") << ReadFile(out);
  ASSERT_EQ(Revoke(json{{"resource", "pair:b"}}.dump()).status, 200);
  EXPECT_EQ(fifo.ReadLine(milliseconds(15'000)), "TERM") << ReadFile(out);
  EXPECT_EQ(WaitChild(job, milliseconds(15'000)), 72) << ReadFile(out);
  EXPECT_NE(ReadFile(out).find("locks \"pair:a\", \"pair:b\" were lost: \"pair:b\": revoked"),
            std::string::npos)
      << ReadFile(out);
  ASSERT_TRUE(Eventually([&] { return cluster_.CountWithKey(KeyOf("pair:a")) == 0; },
                         milliseconds(15'000)))
      << "pair:a outlived its command";
}

}  // namespace
}  // namespace lw::test::force_release
