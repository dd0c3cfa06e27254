// The admin listener of a real agent: /metrics under real traffic (checked by promtool and
// against the shipped dashboard), /healthz and /readyz as masters die.

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/dashboard_check.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "state_util.h"
#include "test_util.h"

namespace lw::test::observability {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// For a state the agent reaches on its own (a snapshot, a health tick, a reconnect): generous,
// it only ends a failing test.
constexpr milliseconds kEventDeadline{10'000};

std::string Master(const RedisCluster& c, int i) {
  return "127.0.0.1:" + std::to_string(c.port(i));
}

// Runs `promtool check metrics` on `exposition`; returns its exit code and output.
std::pair<int, std::string> PromtoolCheck(const std::string& dir, const std::string& exposition) {
  const std::string in = dir + "/metrics.txt", out = dir + "/promtool.out";
  std::ofstream(in) << exposition;
  const pid_t pid = SpawnTestProcess({"bash", "-c", "promtool check metrics < " + in}, out);
  const int rc = WaitChild(pid, milliseconds(20'000));
  std::ifstream result(out);
  return {rc, std::string(std::istreambuf_iterator<char>(result), {})};
}

class MetricsTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{3};
  AgentProcess agent_{cluster_, {"--scan-interval-ms", "500"}};
  int port() const { return agent_.admin_port(); }
};

TEST_F(MetricsTest, CountsWhatHappenedAndPassesPromtool) {
  auto a = agent_.Connect();
  auto b = agent_.Connect();
  for (int i = 0; i < 5; ++i) {
    json g = a.Acquire("m-" + std::to_string(i), 10'000, 1'000);
    ASSERT_EQ(g.value("ok", false), true) << g;
    ASSERT_EQ(a.Release("m-" + std::to_string(i), g["token"]).value("ok", false), true);
  }
  // Held for longer than the test can take: it must not expire (and count as a hold) here.
  json held = a.Acquire("busy", 60'000, 1'000);
  ASSERT_TRUE(held.value("ok", false));
  json timed_out = b.Acquire("busy", 10'000, 100);  // held by a: times out queued
  ASSERT_EQ(timed_out["error"], "timeout") << timed_out;
  json not_held = b.Release("busy", "0123456789abcdef0123456789abcdef01234567");
  ASSERT_EQ(not_held["error"], "not_held") << not_held;
  ASSERT_EQ(b.Call({{"op", "acquire"}, {"resource", ""}})["error"], "bad_request");
  b.SendRaw("this is not json\n");
  ASSERT_TRUE(b.ReadLine(kEventDeadline).has_value());

  // Counters move on the loop thread as events happen; the scrape must see all of them.
  const std::string m = ScrapeMetrics(port());
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(Sample(m, "lockwarden_acquire_wait_seconds_count", {{"outcome", "acquired"}}), 6);
  EXPECT_EQ(Sample(m, "lockwarden_acquire_wait_seconds_count", {{"outcome", "timeout"}}), 1);
  EXPECT_EQ(Sample(m, "lockwarden_acquire_attempts_count"), 7);
  EXPECT_EQ(Sample(m, "lockwarden_lock_hold_seconds_count"), 5);
  EXPECT_EQ(Sample(m, "lockwarden_requests_total", {{"op", "acquire"}}), 8);
  EXPECT_EQ(Sample(m, "lockwarden_requests_total", {{"op", "release"}}), 6);
  EXPECT_EQ(Sample(m, "lockwarden_failures_total", {{"op", "acquire"}, {"reason", "timeout"}}),
            1);
  EXPECT_EQ(Sample(m, "lockwarden_failures_total", {{"op", "release"}, {"reason", "not_held"}}),
            1);
  EXPECT_EQ(
      Sample(m, "lockwarden_failures_total", {{"op", "acquire"}, {"reason", "bad_request"}}), 1);
  EXPECT_EQ(
      Sample(m, "lockwarden_failures_total", {{"op", "request"}, {"reason", "bad_request"}}), 1);
  for (int i = 0; i < cluster_.size(); ++i) {
    // 6 granted claims reached every master (plus none refused: all were free), each timed.
    EXPECT_GE(Sample(m, "lockwarden_master_requests_total",
                     {{"master", Master(cluster_, i)}, {"command", "claim_exclusive"}})
                  .value_or(0),
              6);
    EXPECT_GE(Sample(m, "lockwarden_master_request_duration_seconds_count",
                     {{"master", Master(cluster_, i)}})
                  .value_or(0),
              6);
    EXPECT_EQ(Sample(m, "lockwarden_master_up", {{"master", Master(cluster_, i)}}), 1);
  }
  EXPECT_EQ(Sample(m, "lockwarden_quorum_size"), 2);
  EXPECT_EQ(Sample(m, "lockwarden_build_info").value_or(0), 1);
  // Gauges are sampled every 250 ms.
  EXPECT_TRUE(Eventually([&] { return MetricNow(port(), "lockwarden_locks_held") == 1; },
                         kEventDeadline));
  EXPECT_TRUE(Eventually([&] { return MetricNow(port(), "lockwarden_sessions") == 2; },
                         kEventDeadline));

  auto [rc, output] = PromtoolCheck(agent_.dir(), m);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "") << "promtool lint findings:\n" << output;
}

// An agent stopped for 400 ms (SIGSTOP: its loop cannot run; the stop is the event under test)
// shows, once it runs again, a late loop: in the lag histogram and in the state's maxima.
TEST_F(MetricsTest, AStoppedAgentShowsItsLoopLate) {
  ASSERT_GE(MetricNow(port(), "lockwarden_loop_lag_seconds_count"), 0) << "not exported";
  const double lag_before = MetricNow(port(), "lockwarden_loop_lag_seconds_sum");
  agent_.Signal(SIGSTOP);
  std::this_thread::sleep_for(milliseconds(400));
  agent_.Signal(SIGCONT);
  const json state = StateWhen(
      agent_, [](const json& s) { return s["loop"].value("lag_max_ms", 0.0) >= 300; },
      kEventDeadline);
  EXPECT_GE(state["loop"].value("lag_max_ms", 0.0), 300) << state["loop"];
  EXPECT_GE(state["loop"].value("turn_max_ms", -1.0), 0) << state["loop"];
  EXPECT_EQ(state["loop"].value("window_s", 0), 10);
  // Buckets: at least one lag sample above 0.25 s.
  const auto buckets = HistogramBuckets(ScrapeMetrics(port()), "lockwarden_loop_lag_seconds");
  ASSERT_FALSE(buckets.empty());
  double at_most_quarter = 0;
  for (const auto& b : buckets) {
    if (b.le <= 0.25) at_most_quarter = b.count;
  }
  EXPECT_GT(buckets.back().count, at_most_quarter) << "no lag sample above 0.25 s";
  EXPECT_GE(MetricNow(port(), "lockwarden_loop_lag_seconds_sum") - lag_before, 0.3);
}

TEST_F(MetricsTest, ShippedDashboardUsesOnlyExportedMetrics) {
  std::ifstream in(std::string(LOCKWARDEN_SOURCE_DIR) + "/dashboards/lockwarden.json");
  ASSERT_TRUE(in) << "dashboards/lockwarden.json missing";
  const json dashboard = json::parse(in);
  for (const auto& problem : DashboardProblems(dashboard)) ADD_FAILURE() << problem;
  // Scanner families appear once the scanner is on (it is, every 500 ms).
  ASSERT_TRUE(Eventually(
      [&] { return MetricNow(port(), "lockwarden_scan_last_success_timestamp_seconds") > 0; },
      kEventDeadline));
  // The fleet totals are exported only by the reporter (docs/observability.md): this lone agent
  // becomes it at a heartbeat once it holds the reporter key on a quorum.
  ASSERT_TRUE(Eventually([&] { return MetricNow(port(), "lockwarden_fleet_reporter") == 1; },
                         kEventDeadline));
  const std::string live = ScrapeMetrics(port());
  for (const auto& unknown : UnknownMetrics(dashboard, live)) {
    ADD_FAILURE() << "dashboard queries a metric the agent does not export: " << unknown;
  }
}

TEST(ReadinessTest, ReadyzFollowsQuorumAndHealthzStaysUp) {
  RedisCluster cluster(3);
  AgentProcess agent(cluster);
  const int port = agent.admin_port();
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  // State is published every 250 ms, so readiness may trail the socket's health by that much.
  HttpResult ready;
  EXPECT_TRUE(Eventually(
      [&] {
        ready = HttpGet(port, "/readyz");
        return ready.status == 200;
      },
      kEventDeadline))
      << ready.body;
  EXPECT_NE(ready.body.find("3 of 3"), std::string::npos) << ready.body;

  cluster.Kill(0);
  const std::string dead = Master(cluster, 0);
  EXPECT_TRUE(Eventually(
      [&] { return MetricNow(port, "lockwarden_master_up", {{"master", dead}}) == 0; },
      kEventDeadline));
  EXPECT_TRUE(Eventually([&] { return MetricNow(port, "lockwarden_quorum_margin") == 0; },
                         kEventDeadline));
  EXPECT_EQ(HttpGet(port, "/readyz").status, 200);  // 2 of 3 is still a quorum

  cluster.Kill(1);
  EXPECT_TRUE(Eventually([&] { return HttpGet(port, "/readyz").status == 503; },
                         kEventDeadline));
  EXPECT_EQ(MetricNow(port, "lockwarden_quorum_margin"), -1);
  EXPECT_EQ(MetricNow(port, "lockwarden_masters_up"), 1);
  EXPECT_GE(MetricNow(port, "lockwarden_master_errors_total",
                      {{"master", dead}, {"kind", "connect_failed"}}),
            1);
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);  // the process is fine

  cluster.Restart(0);
  EXPECT_TRUE(Eventually([&] { return HttpGet(port, "/readyz").status == 200; },
                         2 * kEventDeadline));
  EXPECT_EQ(MetricNow(port, "lockwarden_master_reconnects_total", {{"master", dead}}), 1);
}

TEST(AdminConfigTest, BadListenAddressAndTakenPortStopTheAgent) {
  RedisCluster cluster(1);
  const std::string dir = MakeTempDir("lw-admin-cfg-");
  pid_t pid = SpawnTestProcess({LockwardenBinary(), "serve", "--socket", dir + "/a.sock",
                                "--master", cluster.url(0), "--admin-listen", "nowhere"},
                               dir + "/bad.log");
  EXPECT_EQ(WaitChild(pid, kEventDeadline), 64);
  std::ifstream bad(dir + "/bad.log");
  const std::string bad_text(std::istreambuf_iterator<char>(bad), {});
  EXPECT_NE(bad_text.find("admin_listen"), std::string::npos) << bad_text;

  AgentProcess first(cluster);
  pid = SpawnTestProcess({LockwardenBinary(), "serve", "--socket", dir + "/b.sock", "--master",
                          cluster.url(0), "--admin-listen",
                          "127.0.0.1:" + std::to_string(first.admin_port())},
                         dir + "/taken.log");
  EXPECT_EQ(WaitChild(pid, kEventDeadline), 1);
  std::ifstream taken(dir + "/taken.log");
  const std::string taken_text(std::istreambuf_iterator<char>(taken), {});
  EXPECT_NE(taken_text.find("cannot bind"), std::string::npos) << taken_text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lw::test::observability
