// Alert rules end to end: real masters, a real agent scanning for leaks every second, and a real
// Prometheus scraping the agent and evaluating alerts/lockwarden.rules.yml with every `for:`
// shortened to 2 s. Each test injects one condition and checks which alerts fire.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/agent_process.h"
#include "support/http.h"
#include "support/prometheus_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::alerts_e2e {
namespace {

using nlohmann::json;

constexpr milliseconds kSetupDeadline{20'000};
constexpr milliseconds kFireDeadline{25'000};
constexpr char kForOverride[] = "2s";
// Long enough for a condition to have gone pending and then firing with `for: 2s` had it been
// true: one scrape (1 s) + one evaluation (1 s) + the 2 s hold, with a margin.
constexpr milliseconds kQuietWindow{6'000};

// Eventually with a pause fitting Prometheus' 1 s ticks (each check is an HTTP query).
bool Poll(const std::function<bool()>& condition, milliseconds deadline) {
  const auto end = SteadyClock::now() + deadline;
  for (;;) {
    if (condition()) return true;
    if (SteadyClock::now() >= end) return false;
    std::this_thread::sleep_for(milliseconds(200));
  }
}

std::string RulesFile() {
  const std::filesystem::path root = LOCKWARDEN_SOURCE_DIR;
  return (root / "alerts" / "lockwarden.rules.yml").string();
}

std::string Join(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (const auto& n : names) out << (out.tellp() > 0 ? "," : "") << n;
  return "[" + out.str() + "]";
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The alerts a test's own workload can raise: all but LockwardenLoopLagHigh, which speaks of the
// host. Its p99 over 5m, on a test's ten seconds of samples (a hundred), is one sample over 25 ms:
// one time slice given to another job on a loaded box (the gate's sanitizer build runs beside
// these tests). Its arithmetic is checked by alerts/tests/loop_test.yml.
std::vector<std::string> WorkloadAlerts(std::vector<std::string> names) {
  names.erase(std::remove(names.begin(), names.end(), "LockwardenLoopLagHigh"), names.end());
  return names;
}

// host:port of master i, as the agent labels it (`master` label).
std::string MasterLabel(const RedisCluster& cluster, int i) {
  return "127.0.0.1:" + std::to_string(cluster.port(i));
}

// `master` labels of the firing instances of an alert (ALERTS series).
std::vector<std::string> FiringMasters(const PrometheusProcess& prom, const std::string& alert) {
  std::vector<std::string> masters;
  for (const auto& s : prom.Query("ALERTS{alertname=\"" + alert + "\",alertstate=\"firing\"}")) {
    masters.push_back(s["metric"].value("master", ""));
  }
  return masters;
}

// Records and prints how long an alert took to fire after the fault was injected.
void ReportFired(const PrometheusProcess& prom, const std::string& alert,
                 SteadyClock::time_point since) {
  const double ms = MsSince(since);
  std::cout << "[ alerts   ] " << alert << " firing " << ms / 1000.0
            << " s after the fault; all firing: " << Join(prom.FiringAlerts()) << "\n";
  ::testing::Test::RecordProperty(alert + "_fire_ms", static_cast<int>(ms));
}

// The annotation `name` of the first active instance of `alert` (GET /api/v1/alerts), "" if
// there is none.
std::string AlertAnnotation(const PrometheusProcess& prom, const std::string& alert,
                            const std::string& name) {
  const json alerts = prom.ApiGet("/api/v1/alerts");
  for (const auto& a : alerts["data"]["alerts"]) {
    if (a["labels"].value("alertname", "") == alert) return a["annotations"].value(name, "");
  }
  return "";
}

// Follows a runbook_url to an agent on 127.0.0.1: true when the page there answers 200 and has
// an element with the URL's anchor as its id.
bool RunbookOpens(const std::string& url) {
  static const std::regex kUrl(R"(^http://127\.0\.0\.1:(\d+)(/[^#]*)#(.+)$)");
  std::smatch m;
  if (!std::regex_match(url, m, kUrl)) return false;
  const HttpResult page = HttpGet(std::stoi(m.str(1)), m.str(2));
  return page.status == 200 && page.body.find("id=\"" + m.str(3) + "\"") != std::string::npos;
}

// Every alert the tests rely on is loaded, and every rule's last evaluation succeeded: a rule
// whose evaluation errors (e.g. a many-to-many match) never fires, and says so only here.
void ExpectRulesHealthy(const PrometheusProcess& prom) {
  std::vector<std::string> loaded;
  // Named: a range-for over a member of a temporary dangles.
  const json rules = prom.ApiGet("/api/v1/rules");
  for (const auto& group : rules["data"]["groups"]) {
    for (const auto& rule : group["rules"]) {
      loaded.push_back(rule.value("name", ""));
      EXPECT_EQ(rule.value("health", ""), "ok")
          << loaded.back() << ": " << rule.value("lastError", "");
    }
  }
  for (const char* name :
       {"LockwardenQuorumLost", "LockwardenQuorumAtRisk", "LockwardenMasterDown",
        "LockwardenAcquireWaitHigh", "LockwardenAcquireFailuresHigh", "LockwardenLockLost",
        "LockwardenLeakedKeys", "LockwardenScannerStale", "LockwardenAgentDown"}) {
    EXPECT_TRUE(Contains(loaded, name)) << name << " not in " << Join(loaded);
  }
}

// Five masters, an agent scanning every second (with `agent_args` too), and Prometheus
// scraping it (with `external_labels`); ready once the target is up and a scan pass over every
// master has been scraped, with nothing firing yet.
struct Stack {
  using Labels = std::map<std::string, std::string>;

  Stack(std::vector<std::string> agent_args, const Labels& external_labels)
      : agent(cluster, WithScanEverySecond(std::move(agent_args))),
        prom({"127.0.0.1:" + std::to_string(agent.admin_port())}, RulesFile(), kForOverride,
             external_labels) {}

  static std::vector<std::string> WithScanEverySecond(std::vector<std::string> args) {
    args.insert(args.begin(), {"--scan-interval-ms", "1000"});
    return args;
  }

  RedisCluster cluster{5};
  AgentProcess agent;
  PrometheusProcess prom;

  static std::unique_ptr<Stack> Start(std::vector<std::string> agent_args = {},
                                      const Labels& external_labels = {}) {
    const auto t0 = SteadyClock::now();
    auto s = std::make_unique<Stack>(std::move(agent_args), external_labels);
    EXPECT_TRUE(s->prom.WaitTargetsUp(kSetupDeadline)) << s->prom.LogTail();
    EXPECT_TRUE(Poll(
        [&] {
          return s->prom.QueryValue("count(lockwarden_scan_last_success_timestamp_seconds > 0)")
                     .value_or(0) == 5;
        },
        kSetupDeadline))
        << s->agent.Log();
    EXPECT_TRUE(WorkloadAlerts(s->prom.FiringAlerts()).empty()) << Join(s->prom.FiringAlerts());
    std::cout << "[ stack    ] ready in " << MsSince(t0) / 1000.0 << " s\n";
    return s;
  }
};

// Lock traffic from one client until `stop`: a contended resource taken with a short wait (so
// some acquires time out) and a private one. Counts outcomes; anything else is an error.
// no_quorum is counted apart: a rare one (a master missing the node timeout on a loaded box)
// must stay below LockwardenAcquireFailuresHigh.
struct TrafficStats {
  std::atomic<int> acquired{0}, timeouts{0}, no_quorum{0}, errors{0};
  std::mutex mu;
  std::string last_error;  // guarded by mu

  void Error(const std::string& what) {
    ++errors;
    std::lock_guard lock(mu);
    last_error = what;
  }
};

void Traffic(const AgentProcess& agent, int id, const std::atomic<bool>& stop, TrafficStats& st) {
  try {
    auto c = agent.Connect();
    const std::string own = "own-" + std::to_string(id);
    while (!stop.load()) {
      for (const std::string& resource : {std::string("hot"), own}) {
        const json r = c.Acquire(resource, 5'000, resource == "hot" ? 5 : 100);
        if (r.value("ok", false)) {
          ++st.acquired;
          std::this_thread::sleep_for(milliseconds(resource == "hot" ? 20 : 2));  // the work
          const json rel = c.Release(resource, r["token"]);
          if (!rel.value("ok", false)) st.Error(rel.dump());
        } else if (r.value("error", "") == "timeout") {
          ++st.timeouts;
        } else if (r.value("error", "") == "no_quorum") {
          ++st.no_quorum;
        } else {
          st.Error(r.dump());
        }
      }
    }
  } catch (const std::exception& e) {
    st.Error(e.what());
  }
}

TEST(AlertsE2E, SteadyTrafficFiresNothing) {
  // A 500 ms node timeout (the shortest ttl must be twice that; the fixture's default, given
  // here as this test depends on it): a loaded box (sanitizers, other jobs) must not turn
  // healthy masters into no_quorum answers, which is what the alert is about.
  auto s = Stack::Start({"--node-timeout-ms", "500", "--min-ttl-ms", "1000"});
  TrafficStats stats;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] { Traffic(s->agent, i, stop, stats); });
  }
  // The workload: 10 s of traffic, i.e. ~10 scrapes and evaluations, checked every 2 s.
  const auto start = SteadyClock::now();
  for (int check = 1; check <= 5; ++check) {
    std::this_thread::sleep_until(start + check * milliseconds(2'000));
    const auto firing = WorkloadAlerts(s->prom.FiringAlerts());
    EXPECT_TRUE(firing.empty()) << "at " << check * 2 << " s: " << Join(firing);
  }
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(stats.errors.load(), 0) << stats.last_error;
  EXPECT_GT(stats.acquired.load(), 100);
  // Well under the alert's 5% of all acquires (timeouts included).
  EXPECT_LE(stats.no_quorum.load(), (stats.acquired + stats.timeouts + stats.no_quorum) / 50);
  EXPECT_GT(stats.timeouts.load(), 0) << "no contention: the workload did not exercise timeouts";
  // Prometheus saw the traffic, timeouts included.
  EXPECT_GT(s->prom.QueryValue("sum(lockwarden_acquire_wait_seconds_count{outcome=\"acquired\"})")
                .value_or(0),
            0);
  EXPECT_GT(s->prom.QueryValue("sum(lockwarden_acquire_wait_seconds_count{outcome=\"timeout\"})")
                .value_or(0),
            0);
  for (const auto& state : {s->prom.FiringAlerts(), s->prom.PendingAlerts()}) {
    EXPECT_TRUE(WorkloadAlerts(state).empty()) << Join(state);
  }
  ExpectRulesHealthy(s->prom);
  std::cout << "[ traffic  ] acquired " << stats.acquired << ", timeouts " << stats.timeouts
            << ", no_quorum " << stats.no_quorum << "; loop lag p99 "
            << s->prom
                   .QueryValue(
                       "histogram_quantile(0.99, sum by (le) "
                       "(rate(lockwarden_loop_lag_seconds_bucket[5m])))")
                   .value_or(-1)
            << " s\n";
}

TEST(AlertsE2E, OneMasterDownFiresMasterDown) {
  auto s = Stack::Start();
  s->cluster.Kill(2);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(s->prom.WaitFiring("LockwardenMasterDown", kFireDeadline))
      << Join(s->prom.FiringAlerts()) << "\n"
      << s->prom.LogTail();
  ReportFired(s->prom, "LockwardenMasterDown", t0);
  EXPECT_EQ(FiringMasters(s->prom, "LockwardenMasterDown"),
            std::vector<std::string>{MasterLabel(s->cluster, 2)});
  // No external label: the runbook link is the agent's own /runbooks (its `instance`), and it
  // opens at the alert's section.
  const std::string url = AlertAnnotation(s->prom, "LockwardenMasterDown", "runbook_url");
  EXPECT_EQ(url, "http://127.0.0.1:" + std::to_string(s->agent.admin_port()) +
                     "/runbooks#lockwardenmasterdown");
  EXPECT_TRUE(RunbookOpens(url)) << url;
  // 4 of 5 up, quorum 3: margin 1. Neither quorum alert may fire nor even be pending.
  EXPECT_EQ(s->prom.QueryValue("lockwarden_quorum_margin"), 1.0);
  for (const auto& state : {s->prom.FiringAlerts(), s->prom.PendingAlerts()}) {
    EXPECT_FALSE(Contains(state, "LockwardenQuorumLost")) << Join(state);
    EXPECT_FALSE(Contains(state, "LockwardenQuorumAtRisk")) << Join(state);
  }
  ExpectRulesHealthy(s->prom);
}

// The operator sets the runbooks' URL once, as an external label of Prometheus: every link
// starts with it.
TEST(AlertsE2E, RunbookUrlFollowsTheExternalLabel) {
  auto s = Stack::Start({}, {{"lockwarden_runbooks", "https://runbooks.example/lockwarden"}});
  s->cluster.Kill(2);
  ASSERT_TRUE(s->prom.WaitFiring("LockwardenMasterDown", kFireDeadline))
      << Join(s->prom.FiringAlerts()) << "\n"
      << s->prom.LogTail();
  EXPECT_EQ(AlertAnnotation(s->prom, "LockwardenMasterDown", "runbook_url"),
            "https://runbooks.example/lockwarden#lockwardenmasterdown");
}

TEST(AlertsE2E, ThreeMastersDownFiresQuorumLost) {
  auto s = Stack::Start();
  for (int i : {0, 1, 2}) s->cluster.Kill(i);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(s->prom.WaitFiring("LockwardenQuorumLost", kFireDeadline))
      << Join(s->prom.FiringAlerts()) << "\n"
      << s->prom.LogTail();
  ReportFired(s->prom, "LockwardenQuorumLost", t0);
  EXPECT_EQ(s->prom.QueryValue("lockwarden_quorum_margin"), -1.0);
  // Margin -1 is not "at risk" (== 0): only QuorumLost speaks for it.
  EXPECT_FALSE(Contains(s->prom.FiringAlerts(), "LockwardenQuorumAtRisk"));
  EXPECT_TRUE(Poll([&] { return FiringMasters(s->prom, "LockwardenMasterDown").size() == 3; },
                   milliseconds(10'000)))
      << Join(FiringMasters(s->prom, "LockwardenMasterDown"));
  ExpectRulesHealthy(s->prom);
}

TEST(AlertsE2E, LeakedKeyFiresLeakedKeys) {
  auto s = Stack::Start();
  // A partial: a lock copy with a TTL on 2 of 5 masters (< quorum 3). The scanner reports it,
  // but it expires by itself, so LeakedKeys must stay silent.
  for (int i : {0, 1}) s->cluster.Set(i, KeyOf("partial-by-test"), "partial-token", 60'000);
  ASSERT_TRUE(Poll(
      [&] {
        return s->prom.QueryValue("sum(lockwarden_scan_leaked_keys{finding=\"partial\"})")
                   .value_or(0) == 2;
      },
      kSetupDeadline))
      << s->agent.Log();
  const auto quiet_end = SteadyClock::now() + kQuietWindow;
  while (SteadyClock::now() < quiet_end) {
    for (const auto& state : {s->prom.FiringAlerts(), s->prom.PendingAlerts()}) {
      ASSERT_FALSE(Contains(state, "LockwardenLeakedKeys")) << "partial alone: " << Join(state);
    }
    std::this_thread::sleep_for(milliseconds(500));
  }
  // A lock key without TTL on one master never expires: that is a leak.
  s->cluster.Set(3, KeyOf("leaked-by-test"), "leaked-token", 0);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(s->prom.WaitFiring("LockwardenLeakedKeys", kFireDeadline))
      << Join(s->prom.FiringAlerts()) << "\n"
      << s->agent.Log();
  ReportFired(s->prom, "LockwardenLeakedKeys", t0);
  EXPECT_EQ(FiringMasters(s->prom, "LockwardenLeakedKeys"),
            std::vector<std::string>{MasterLabel(s->cluster, 3)});
  ExpectRulesHealthy(s->prom);
}

}  // namespace
}  // namespace lw::test::alerts_e2e
