// GET /api/v1/state and the page behind it, against real masters and a real agent: holders with
// their command line, where each key really is, stuck locks, master events and restarts, failed
// acquires, the acquire history, and the page's own HTTP headers.

#include <unistd.h>

#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "support/agent_process.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "state_util.h"
#include "test_util.h"

namespace lw::test::state_api {
namespace {

using nlohmann::json;

std::optional<json> LockOf(const json& state, const std::string& resource) {
  for (const json& l : state.value("locks", json::array())) {
    if (l["resource"] == resource) return l;
  }
  return std::nullopt;
}

std::vector<std::string> PresenceOf(const json& lock) {
  std::vector<std::string> out;
  for (const json& p : lock["presence"]) out.push_back(p);
  return out;
}

class StateApiTest : public ::testing::Test {
 protected:
  RedisCluster cluster_{5};
};

TEST_F(StateApiTest, ShowsTheHolderAndWhereItsKeyReallyIs) {
  AgentProcess agent(cluster_);
  auto client = agent.Connect();
  const json grant = client.Acquire("orders", 60'000, 1'000, /*renew=*/true);
  ASSERT_TRUE(grant.value("ok", false)) << grant;
  const std::string token = grant["token"];
  // Break the lock behind the agent's back: someone else's token on master 1, and master 3
  // restarted without persistence (its copy is gone, and so is its old run_id).
  const std::string old_run_id = State(agent)["masters"][3]["run_id"];
  cluster_.Set(1, KeyOf("orders"), "someone-else", 60'000);
  cluster_.Restart(3);

  const json state = StateWhen(
      agent,
      [](const json& s) {
        auto lock = LockOf(s, "orders");
        return lock && PresenceOf(*lock) == std::vector<std::string>{"held", "other", "held",
                                                                      "missing", "held"};
      },
      milliseconds(15'000));
  auto lock = LockOf(state, "orders");
  ASSERT_TRUE(lock) << state.dump(1);
  EXPECT_EQ(PresenceOf(*lock),
            (std::vector<std::string>{"held", "other", "held", "missing", "held"}))
      << lock->dump(1);
  EXPECT_NE((*lock)["presence_checked_at"], "");
  EXPECT_EQ((*lock)["pid"], static_cast<int>(getpid()));
  EXPECT_EQ((*lock)["uid"], static_cast<int>(getuid()));
  EXPECT_EQ((*lock)["gid"], static_cast<int>(getgid()));
  EXPECT_NE((*lock)["cmdline"].get<std::string>().find("lw_integration_tests"), std::string::npos)
      << (*lock)["cmdline"];
  EXPECT_EQ((*lock)["ttl_ms"], 60'000);
  EXPECT_EQ((*lock)["renew"], true);
  EXPECT_EQ((*lock)["stuck"], false);
  EXPECT_EQ(state.dump().find(token), std::string::npos) << "a token was shown";

  // The restarted master reports its new identity.
  const json restarted = StateWhen(agent, [&](const json& s) {
    return s["masters"][3]["run_id"] != old_run_id && s["masters"][3]["up"] == true;
  }, milliseconds(15'000));
  const json& m3 = restarted["masters"][3];
  EXPECT_NE(m3["run_id"], old_run_id);
  EXPECT_NE(m3["run_id"], "");
  ASSERT_TRUE(m3["uptime_s"].is_number()) << m3;
  EXPECT_LT(m3["uptime_s"].get<int64_t>(), 30);
  EXPECT_TRUE(m3["rtt_p50_ms"].is_number()) << m3;
  EXPECT_TRUE(m3["rtt_p99_ms"].is_number()) << m3;
  EXPECT_GE(m3["reconnects"].get<int>(), 1);
}

TEST_F(StateApiTest, EachHoldCarriesItsKindAndItsResourcesHolders) {
  AgentProcess agent(cluster_);
  auto a = agent.Connect();
  auto b = agent.Connect();
  const auto acquire = [](lw::client::Client& c, const std::string& resource,
                          lw::client::Client::HoldKind kind) {
    const json grant = c.Acquire(resource, 60'000, 1'000, kind);
    EXPECT_TRUE(grant.value("ok", false)) << grant;
    return grant;
  };
  const json p1 = acquire(a, "pool", {.permits = 3});
  const json p2 = acquire(b, "pool", {.permits = 3});
  acquire(a, "cfg", {.shared = true});
  acquire(b, "cfg", {.shared = true});
  acquire(a, "plain", {});

  const auto holds_of = [](const json& s, const std::string& resource) {
    std::vector<json> out;
    for (const json& l : s.value("locks", json::array())) {
      if (l["resource"] == resource) out.push_back(l);
    }
    return out;
  };
  const json state = StateWhen(agent, [&](const json& s) {
    return holds_of(s, "pool").size() == 2 && holds_of(s, "cfg").size() == 2 &&
           holds_of(s, "plain").size() == 1;
  }, milliseconds(15'000));
  std::set<int> permits;
  for (const json& l : holds_of(state, "pool")) {
    EXPECT_EQ(l["kind"], "semaphore") << l;
    EXPECT_EQ(l["mode"], "permit") << l;
    EXPECT_EQ(l["permits"], 3) << l;
    EXPECT_EQ(l["holders"], 2) << l;
    permits.insert(l["permit"].get<int>());
  }
  EXPECT_EQ(permits, (std::set<int>{p1["permit"].get<int>(), p2["permit"].get<int>()}));
  for (const json& l : holds_of(state, "cfg")) {
    EXPECT_EQ(l["kind"], "mutex") << l;
    EXPECT_EQ(l["mode"], "shared") << l;
    EXPECT_TRUE(l["permits"].is_null() && l["permit"].is_null()) << l;
    EXPECT_EQ(l["holders"], 2) << l;
  }
  const json plain = holds_of(state, "plain").at(0);
  EXPECT_EQ(plain["kind"], "mutex") << plain;
  EXPECT_EQ(plain["mode"], "exclusive") << plain;
  EXPECT_EQ(plain["holders"], 1) << plain;
}

TEST_F(StateApiTest, StuckLocksComeFirstWithTheReason) {
  // The renewed lock becomes stuck only once held for longer than stuck_after: 5 s, so that the
  // first look below (one acquire and a state snapshot later) happens well before.
  constexpr int kStuckAfterMs = 5'000;
  AgentProcess agent(cluster_, {"--stuck-after-ms", std::to_string(kStuckAfterMs)});
  auto renewed = agent.Connect();
  auto long_ttl = agent.Connect();
  const auto renewed_at = SteadyClock::now();  // "renewed" is held from after this
  ASSERT_TRUE(renewed.Acquire("renewed", 10'000, 1'000, /*renew=*/true).value("ok", false));
  // Taken after "renewed" is visible, so the two are held for clearly different times.
  StateWhen(agent, [](const json& s) { return LockOf(s, "renewed").has_value(); });
  ASSERT_TRUE(long_ttl.Acquire("long-ttl", 60'000, 1'000, /*renew=*/false).value("ok", false));

  // Not renewed with a ttl above stuck_after: stuck at once; the renewed one only once it has
  // been held for longer than stuck_after.
  json state = StateWhen(agent, [](const json& s) { return LockOf(s, "long-ttl").has_value(); });
  ASSERT_LT(MsSince(renewed_at), kStuckAfterMs) << "too slow to see the renewed lock not stuck";
  auto lock = LockOf(state, "long-ttl");
  ASSERT_TRUE(lock) << state.dump(1);
  EXPECT_EQ((*lock)["stuck"], true);
  EXPECT_NE((*lock)["stuck_reason"].get<std::string>().find("not renewing"), std::string::npos);
  EXPECT_EQ(state["locks"][0]["resource"], "long-ttl");
  EXPECT_EQ(state["stuck_after_ms"], kStuckAfterMs);
  auto renewed_lock = LockOf(state, "renewed");
  ASSERT_TRUE(renewed_lock) << state.dump(1);
  EXPECT_EQ((*renewed_lock)["stuck"], false) << "stuck before stuck_after";

  state = StateWhen(
      agent,
      [](const json& s) {
        auto l = LockOf(s, "renewed");
        return l && (*l)["stuck"] == true;
      },
      milliseconds(4 * kStuckAfterMs));
  EXPECT_GE(MsSince(renewed_at), kStuckAfterMs) << "stuck before stuck_after";
  lock = LockOf(state, "renewed");
  ASSERT_TRUE(lock && (*lock)["stuck"] == true) << state.dump(1);
  EXPECT_NE((*lock)["stuck_reason"].get<std::string>().find("over stuck_after"), std::string::npos);
  // Both stuck: the longest held first.
  EXPECT_EQ(state["locks"][0]["resource"], "renewed");
}

TEST_F(StateApiTest, AmongMoreLocksThanListedTheStuckComeFirstAndTheirKeysAreChecked) {
  // 1,001 renewed locks, then the youngest: not renewing with a ttl over stuck_after, so stuck
  // at once. The state lists 1,000: it must be among them, first, with its key checked on every
  // master (its name sorts after every other key: a probe taking keys in order would skip it).
  AgentProcess agent(cluster_, {"--stuck-after-ms", "50000", "--max-ttl-ms", "120000"});
  auto many = agent.Connect();
  for (int i = 0; i < 1'001; ++i) {
    ASSERT_TRUE(many.Acquire("r" + std::to_string(i), 30'000, 1'000, /*renew=*/true)
                    .value("ok", false))
        << i;
  }
  auto quiet = agent.Connect();
  const json granted = quiet.Acquire("zz-quiet", 120'000, 1'000, /*renew=*/false);
  ASSERT_TRUE(granted.value("ok", false)) << granted;
  const json state = StateWhen(
      agent,
      [](const json& s) {
        auto l = LockOf(s, "zz-quiet");
        return l && PresenceOf(*l) == std::vector<std::string>(5, "held");
      },
      milliseconds(30'000));
  EXPECT_EQ(state["locks_total"], 1'002);
  EXPECT_EQ(state["locks"].size(), 1'000u);
  EXPECT_EQ(state["locks"][0]["resource"], "zz-quiet");
  EXPECT_EQ(state["locks"][0]["stuck"], true);
}

TEST_F(StateApiTest, RecordsMasterEventsFailedAcquiresAndHistory) {
  AgentProcess agent(cluster_);
  auto holder = agent.Connect();
  auto contender = agent.Connect();
  ASSERT_TRUE(holder.Acquire("busy", 30'000, 1'000, /*renew=*/false).value("ok", false));
  for (int i = 0; i < 3; ++i) {
    const json refused = contender.Acquire("busy", 10'000, 50, /*renew=*/false);
    ASSERT_EQ(refused.value("error", ""), "timeout") << refused;
  }
  cluster_.Kill(2);
  const std::string down_addr = "127.0.0.1:" + std::to_string(cluster_.port(2));

  const json state = StateWhen(
      agent,
      [&](const json& s) {
        return HasEvent(s, "master_down", down_addr) && s["quorum"]["state"] == "at_risk";
      },
      milliseconds(15'000));
  EXPECT_TRUE(HasEvent(state, "master_down", down_addr)) << state["events"].dump(1);
  EXPECT_EQ(state["quorum"]["state"], "at_risk");
  EXPECT_EQ(state["quorum"]["margin"], 1);
  EXPECT_TRUE(HasEvent(state, "master_up", "connected"));

  // Three identical refusals within a minute are one event counted three times.
  int failed_events = 0;
  for (const json& e : state["events"]) {
    if (e["kind"] != "acquire_failed") continue;
    ++failed_events;
    EXPECT_EQ(e["count"], 3) << e;
    EXPECT_NE(e["message"].get<std::string>().find("\"busy\""), std::string::npos) << e;
    EXPECT_NE(e["message"].get<std::string>().find("timeout"), std::string::npos) << e;
    EXPECT_EQ(e["severity"], "warning");
  }
  EXPECT_EQ(failed_events, 1) << state["events"].dump(1);

  // The history counts them: 1 acquired and 3 timeouts within the last buckets.
  const json& history = state["history"];
  EXPECT_EQ(history["bucket_ms"], 5000);
  ASSERT_EQ(history["points"].size(), 180u);
  int64_t acquired = 0, timeouts = 0;
  bool some_p99 = false;
  for (const json& p : history["points"]) {
    acquired += p["acquired"].get<int64_t>();
    timeouts += p["timeout"].get<int64_t>();
    some_p99 = some_p99 || p["wait_p99_ms"].is_number();
  }
  EXPECT_EQ(acquired, 1);
  EXPECT_EQ(timeouts, 3);
  EXPECT_TRUE(some_p99);
}

TEST_F(StateApiTest, ThePageIsServedWithAStrictPolicy) {
  AgentProcess agent(cluster_);
  const HttpResult page = HttpGet(agent.admin_port(), "/");
  ASSERT_EQ(page.status, 200) << page.error;
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("data-testid=\"quorum-banner\""), std::string::npos);
  const std::string csp = page.Header("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
  EXPECT_EQ(page.Header("X-Frame-Options"), "DENY");
  EXPECT_EQ(page.Header("X-Content-Type-Options"), "nosniff");

  const HttpResult script = HttpGet(agent.admin_port(), "/app.js");
  ASSERT_EQ(script.status, 200);
  EXPECT_EQ(script.content_type, "text/javascript; charset=utf-8");
  const std::string etag = script.Header("ETag");
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(HttpGet(agent.admin_port(), "/app.js", {{"If-None-Match", etag}}).status, 304);
  EXPECT_EQ(HttpGet(agent.admin_port(), "/nope.js").status, 404);
}

}  // namespace
}  // namespace lw::test::state_api
