// Fencing tokens against 5 real redis-server masters and real agent processes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::fence {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kFenceKey = "fence:ledger";

class FenceTest : public ::testing::Test {
 protected:
  // A fenced grant of `resource` through `agent`, released at once; its fence (or -1).
  static int64_t GrantAndRelease(AgentProcess& agent, const std::string& resource) {
    auto c = agent.Connect();
    const json r = c.Call({{"op", "acquire"}, {"resource", resource}, {"ttl_ms", 5000},
                           {"wait_ms", 5000}, {"fence", true}});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    if (!r.value("ok", false) || !r.contains("fence")) return -1;
    EXPECT_TRUE(c.Release(resource, r["token"]).value("ok", false));
    return r["fence"].get<int64_t>();
  }

  RedisCluster cluster_{5};
};

TEST_F(FenceTest, FencesStrictlyIncreaseAcrossTwoAgentsAndCountersHaveNoTtl) {
  AgentProcess a(cluster_);
  AgentProcess b(cluster_);
  int64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    const int64_t fence = GrantAndRelease(i % 2 == 0 ? a : b, "ledger");
    EXPECT_GT(fence, last) << "grant " << i;
    last = fence;
  }
  EXPECT_EQ(last, 10) << "one counter, raised by one per grant";
  EXPECT_EQ(MetricNow(a.admin_port(), "lockwarden_fence_rounds_total", {{"outcome", "written"}}) +
                MetricNow(b.admin_port(), "lockwarden_fence_rounds_total",
                          {{"outcome", "written"}}),
            10);
  EXPECT_EQ(MetricNow(a.admin_port(), "lockwarden_fence_rounds_total",
                      {{"outcome", "counter_ahead"}}),
            0);
  for (int m = 0; m < 5; ++m) {
    EXPECT_EQ(cluster_.Get(m, kFenceKey), "10") << "master " << m;
    EXPECT_EQ(cluster_.Pttl(m, kFenceKey), -1) << "a fence counter must outlive every lock";
  }
  auto c = a.Connect();
  const json plain = c.Acquire("ledger", 5000, 0);
  ASSERT_TRUE(plain.value("ok", false)) << plain.dump();
  EXPECT_FALSE(plain.contains("fence")) << "no fence unless asked: " << plain.dump();
}

TEST_F(FenceTest, FencesKeepIncreasingAfterTwoMastersRestartWithoutTheirData) {
  AgentProcess agent(cluster_);
  const int64_t before = GrantAndRelease(agent, "ledger");
  ASSERT_GT(before, 0);
  cluster_.Kill(0);
  cluster_.Kill(1);
  cluster_.Restart(0);
  cluster_.Restart(1);
  EXPECT_EQ(cluster_.Get(0, kFenceKey), std::nullopt) << "the restart lost the counter";
  ASSERT_TRUE(agent.WaitReady(std::chrono::seconds(10)));
  // The agent's connections to 0 and 1 died; the next grant may or may not hear them.
  int64_t last = before;
  for (int i = 0; i < 5; ++i) {
    const int64_t fence = GrantAndRelease(agent, "ledger");
    EXPECT_GT(fence, last) << "grant " << i;
    last = fence;
  }
}

TEST_F(FenceTest, AFencedGrantNeedsFourOfFiveMastersAPlainOneThree) {
  AgentProcess agent(cluster_);
  cluster_.Kill(3);
  cluster_.Kill(4);
  auto c = agent.Connect();
  const json fenced = c.Call({{"op", "acquire"}, {"resource", "ledger"}, {"ttl_ms", 5000},
                              {"fence", true}});
  EXPECT_EQ(fenced.value("error", ""), "no_quorum") << fenced.dump();
  EXPECT_THAT(fenced.value("message", ""), HasSubstr("a fenced grant needs 4 of 5"));
  const json plain = c.Acquire("ledger", 5000, 0);
  EXPECT_TRUE(plain.value("ok", false)) << plain.dump();
}

TEST_F(FenceTest, NotAFlagButABooleanIsRefused) {
  AgentProcess agent(cluster_);
  auto c = agent.Connect();
  const json r = c.Call({{"op", "acquire"}, {"resource", "ledger"}, {"fence", "yes"}});
  EXPECT_EQ(r.value("error", ""), "bad_request") << r.dump();
  EXPECT_THAT(r.value("message", ""), HasSubstr("fence"));
}

TEST_F(FenceTest, TheScannerNeverReportsFenceCounters) {
  AgentProcess agent(cluster_);
  ASSERT_GT(GrantAndRelease(agent, "ledger"), 0);
  const std::string dir = MakeTempDir("lw-fence-");
  const std::string out = dir + "/scan.out";
  std::vector<std::string> argv = {LockwardenBinary(), "scan", "--json", "--scan-pattern", "*"};
  for (int i = 0; i < cluster_.size(); ++i) {
    argv.push_back("--master");
    argv.push_back(cluster_.url(i));
  }
  const int rc = WaitChild(SpawnTestProcess(argv, out), milliseconds(10'000));
  const std::string report = ReadFile(out);
  EXPECT_EQ(rc, 0) << report;
  EXPECT_TRUE(json::parse(report)["leaks"].empty()) << report;
  std::filesystem::remove_all(dir);
}

TEST_F(FenceTest, LockCommandExportsTheFence) {
  AgentProcess agent(cluster_);
  ASSERT_EQ(GrantAndRelease(agent, "ledger"), 1);
  const std::string dir = MakeTempDir("lw-fence-");
  const std::string out = dir + "/lock.out";
  const pid_t pid = SpawnTestProcess(
      {LockwardenBinary(), "lock", "--socket", agent.socket_path(), "--fence", "ledger", "--",
       "sh", "-c", "echo \"fence=$LOCKWARDEN_FENCE\""},
      out);
  EXPECT_EQ(WaitChild(pid, milliseconds(10'000)), 0);
  const std::string text = ReadFile(out);
  EXPECT_THAT(text, HasSubstr("fence=2")) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lw::test::fence
