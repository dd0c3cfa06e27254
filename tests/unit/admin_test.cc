// Admin API pure parts: token comparison, the action and read gates, the connection queue, JSON
// views, listen addresses.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include <prometheus/text_serializer.h>

#include "admin/admin_stats.h"
#include "admin/answers.h"
#include "admin/auth.h"
#include "admin/connection_queue.h"
#include "admin/views.h"
#include "config/config.h"

namespace lw {
namespace {

const std::string kToken = "0123456789abcdef0123";

TEST(ConstantTimeEquals, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(JudgeAction, DisabledWithoutAConfiguredToken) {
  auto v = JudgeAction({"Bearer " + kToken, "", "", "h"}, "");
  EXPECT_EQ(v.refusal, Refusal::kDisabled);
  EXPECT_NE(v.message.find("admin_token_file"), std::string::npos);
}

TEST(JudgeAction, NeedsTheRightBearerToken) {
  EXPECT_EQ(JudgeAction({"", "", "", "h"}, kToken).refusal, Refusal::kNoToken);
  EXPECT_EQ(JudgeAction({"Bearer wrong", "", "", "h"}, kToken).refusal, Refusal::kBadToken);
  EXPECT_EQ(JudgeAction({kToken, "", "", "h"}, kToken).refusal, Refusal::kBadToken);
  EXPECT_FALSE(JudgeAction({"Bearer " + kToken, "", "", "h"}, kToken).refusal);
}

TEST(JudgeAction, RefusesCrossSiteBrowsersEvenWithTheToken) {
  const std::string auth = "Bearer " + kToken;
  EXPECT_EQ(JudgeAction({auth, "cross-site", "", "h:1"}, kToken).refusal, Refusal::kCrossSite);
  EXPECT_EQ(JudgeAction({auth, "same-site", "", "h:1"}, kToken).refusal, Refusal::kCrossSite);
  EXPECT_EQ(JudgeAction({auth, "", "http://evil.example", "h:1"}, kToken).refusal,
            Refusal::kCrossSite);
  EXPECT_FALSE(JudgeAction({auth, "same-origin", "http://h:1", "h:1"}, kToken).refusal);
  EXPECT_FALSE(JudgeAction({auth, "none", "", "h:1"}, kToken).refusal);
}

TEST(JudgeRead, OpenOnLoopback) {
  for (auto exposure : {PathExposure::kOpen, PathExposure::kState}) {
    EXPECT_FALSE(JudgeRead("", kToken, ReadScope::kLoopback, exposure).refusal);
    EXPECT_FALSE(JudgeRead("Bearer wrong", kToken, ReadScope::kLoopback, exposure).refusal);
    EXPECT_FALSE(JudgeRead("", "", ReadScope::kLoopback, exposure).refusal);
  }
}

TEST(JudgeRead, BeyondLoopbackStateNeedsTheBearerToken) {
  const auto beyond = ReadScope::kBeyondLoopback;
  const auto state = PathExposure::kState;
  auto none = JudgeRead("", kToken, beyond, state);
  EXPECT_EQ(none.refusal, Refusal::kNoToken);
  EXPECT_NE(none.message.find("Authorization: Bearer"), std::string::npos) << none.message;
  EXPECT_EQ(JudgeRead("Bearer wrong", kToken, beyond, state).refusal, Refusal::kBadToken);
  EXPECT_EQ(JudgeRead(kToken, kToken, beyond, state).refusal, Refusal::kBadToken);
  EXPECT_EQ(JudgeRead("Basic " + kToken, kToken, beyond, state).refusal, Refusal::kBadToken);
  EXPECT_EQ(JudgeRead("Bearer " + kToken + "x", kToken, beyond, state).refusal, Refusal::kBadToken);
  EXPECT_FALSE(JudgeRead("Bearer " + kToken, kToken, beyond, state).refusal);
}

TEST(JudgeRead, BeyondLoopbackOpenPathsNeedNothing) {
  EXPECT_FALSE(JudgeRead("", kToken, ReadScope::kBeyondLoopback, PathExposure::kOpen).refusal);
  EXPECT_FALSE(
      JudgeRead("Bearer wrong", kToken, ReadScope::kBeyondLoopback, PathExposure::kOpen).refusal);
}

TEST(JudgeRead, BeyondLoopbackWithoutAConfiguredTokenFailsClosed) {
  const auto v = JudgeRead("Bearer ", "", ReadScope::kBeyondLoopback, PathExposure::kState);
  EXPECT_EQ(v.refusal, Refusal::kDisabled);
  EXPECT_NE(v.message.find("admin_token_file"), std::string::npos) << v.message;
}

TEST(HttpWorkers, OnePerAdmittedConnectionUpToTheCap) {
  EXPECT_EQ(HttpWorkersFor(1), 1u);
  EXPECT_EQ(HttpWorkersFor(32), 32u);
  EXPECT_EQ(HttpWorkersFor(10'000), kMaxHttpWorkers);
}

// A task that blocks until released, and says it started.
struct Gate {
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::function<void()> Task() {
    return [this] {
      started.set_value();
      released.wait();
    };
  }
};

TEST(ConnectionQueue, ShedsInlineOnceCapacityIsTaken) {
  ConnectionQueue queue(/*workers=*/1, /*capacity=*/2);
  Gate running;
  auto started = running.started.get_future();
  queue.enqueue(running.Task());
  ASSERT_EQ(started.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  std::atomic<bool> second_ran{false};
  std::atomic<bool> second_shed{true};
  queue.enqueue([&] {
    second_shed = ConnectionQueue::ShedNow();
    second_ran = true;
  });
  EXPECT_EQ(queue.waiting(), 1u);
  EXPECT_EQ(queue.admitted(), 2u);
  EXPECT_TRUE(queue.NeedsWorker());

  // Past capacity: runs at once, on this thread, told to shed.
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  bool shed = false;
  queue.enqueue([&] {
    ran_on = std::this_thread::get_id();
    shed = ConnectionQueue::ShedNow();
  });
  EXPECT_EQ(ran_on, caller);
  EXPECT_TRUE(shed);
  EXPECT_FALSE(ConnectionQueue::ShedNow());
  EXPECT_EQ(queue.admitted(), 2u);

  running.release.set_value();
  queue.shutdown();  // runs what is queued, then joins
  EXPECT_TRUE(second_ran);
  EXPECT_FALSE(second_shed);
  EXPECT_EQ(queue.admitted(), 0u);
  EXPECT_FALSE(queue.NeedsWorker());
}

TEST(ConnectionQueue, PastCapacityATaskTakesThePlaceOfOneMakeRoomEnded) {
  bool room = true;  // make_room ends a connection once
  int asked = 0;
  ConnectionQueue queue(1, 1, [&] {
    ++asked;
    const bool r = room;
    room = false;
    return r;
  });
  Gate running;
  auto started = running.started.get_future();
  queue.enqueue(running.Task());
  ASSERT_EQ(started.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(asked, 0);  // there was room

  bool shed = true;
  queue.enqueue([&] { shed = ConnectionQueue::ShedNow(); });  // in place of the running one
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(queue.admitted(), 2u);
  bool third_shed = false;
  queue.enqueue([&] { third_shed = ConnectionQueue::ShedNow(); });  // no room left to make
  EXPECT_EQ(asked, 2);
  EXPECT_TRUE(third_shed);

  queue.EvictionDone();  // the one make_room ended is gone
  running.release.set_value();
  queue.shutdown();
  EXPECT_FALSE(shed);
  EXPECT_EQ(queue.admitted(), 0u);
}

TEST(ConnectionQueue, TasksKnowWhenTheyWereEnqueued) {
  ConnectionQueue queue(1, 4);
  Gate first;
  auto started = first.started.get_future();
  queue.enqueue(first.Task());
  ASSERT_EQ(started.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto before = ConnectionQueue::Clock::now();
  std::promise<ConnectionQueue::Clock::time_point> seen;
  queue.enqueue([&] { seen.set_value(ConnectionQueue::EnqueuedAt()); });
  const auto after = ConnectionQueue::Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the wait must not count
  first.release.set_value();
  const auto enqueued = seen.get_future().get();
  EXPECT_GE(enqueued, before);
  EXPECT_LE(enqueued, after);
}

TEST(IsoTime, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(IsoTime(0), "");
  EXPECT_EQ(IsoTime(1'700'000'000'123), "2023-11-14T22:13:20.123Z");
}

TEST(StateView, QuorumStateInWords) {
  Snapshot s;
  s.quorum = 3;
  s.masters.resize(5);
  auto up = [&s](int n) { s.masters_up = s.masters_usable = n; };
  up(5);
  EXPECT_EQ(StateView(s)["quorum"]["state"], "healthy");
  up(4);  // one down: still a margin of 1, but no longer whole
  EXPECT_EQ(StateView(s)["quorum"]["state"], "at_risk");
  EXPECT_EQ(StateView(s)["quorum"]["margin"], 1);
  up(3);
  EXPECT_EQ(StateView(s)["quorum"]["state"], "at_risk");
  up(2);
  EXPECT_EQ(StateView(s)["quorum"]["state"], "lost");
  EXPECT_EQ(StateView(s)["quorum"]["margin"], -1);
}

TEST(StateView, QuarantinedMastersAreUpButNotUsable) {
  Snapshot s;
  s.quorum = 3;
  s.masters.resize(5);
  for (auto& m : s.masters) m.up = true;
  s.masters[1].quarantined = true;
  s.masters[1].quarantine_left_ms = 4200;
  s.masters[1].quarantine_reason = "started 3.0s ago; may have forgotten locks";
  s.masters_up = 5;
  s.masters_usable = 4;
  auto view = StateView(s);
  EXPECT_EQ(view["quorum"]["up"], 5);
  EXPECT_EQ(view["quorum"]["usable"], 4);
  EXPECT_EQ(view["quorum"]["margin"], 1);
  EXPECT_EQ(view["quorum"]["state"], "at_risk");
  EXPECT_EQ(view["masters"][1]["quarantined"], true);
  EXPECT_EQ(view["masters"][1]["quarantine_left_ms"], 4200);
  EXPECT_EQ(view["masters"][1]["quarantine_reason"], "started 3.0s ago; may have forgotten locks");
  EXPECT_EQ(view["masters"][0]["quarantined"], false);
  EXPECT_TRUE(view["masters"][0]["quarantine_left_ms"].is_null());
  EXPECT_EQ(view["masters"][0]["quarantine_reason"], "");
  s.masters_usable = 2;  // all up, three quarantined: no lock can be granted
  EXPECT_EQ(StateView(s)["quorum"]["state"], "lost");
  EXPECT_EQ(StateView(s)["quorum"]["margin"], -1);
}

LockView Lock(std::string resource, int64_t held_ms, int64_t ttl_ms, bool renew) {
  LockView l;
  l.resource = std::move(resource);
  l.key = "lock:" + l.resource;
  l.held_ms = held_ms;
  l.ttl_ms = ttl_ms;
  l.renew = renew;
  return l;
}

TEST(StuckReason, HeldTooLongOrLongTtlWithoutRenewal) {
  EXPECT_EQ(StuckReason(Lock("a", 1000, 30'000, true), 60'000), "");
  EXPECT_EQ(StuckReason(Lock("a", 61'000, 30'000, true), 60'000),
            "held 1m01s, over stuck_after 1m00s");
  EXPECT_EQ(StuckReason(Lock("a", 1000, 3'600'000, true), 60'000), "");  // renewed: not by ttl
  EXPECT_EQ(StuckReason(Lock("a", 1000, 3'600'000, false), 60'000),
            "not renewing, ttl 1h00m: a hung holder keeps it that long");
}

TEST(StateView, StuckLocksFirstThenLongestHeld) {
  Snapshot s;
  s.quorum = 1;
  s.masters.resize(1);
  s.masters[0].addr = "127.0.0.1:1";
  s.locks = {Lock("long", 50'000, 30'000, true), Lock("short", 10, 30'000, true),
             Lock("stuck", 5, 7'200'000, false)};
  StateInputs in;
  in.snapshot = &s;
  in.stuck_after_ms = 60'000;
  PresenceReport presence;
  presence.checked_unix_ms = 1'700'000'000'000;
  presence.keys["lock:long"] = {KeyPresence::kHeld};
  in.presence = &presence;
  const auto view = StateView(in);
  const auto& locks = view["locks"];
  ASSERT_EQ(locks.size(), 3u);
  EXPECT_EQ(locks[0]["resource"], "stuck");
  EXPECT_EQ(locks[0]["stuck"], true);
  EXPECT_EQ(locks[1]["resource"], "long");
  EXPECT_EQ(locks[1]["presence"], nlohmann::ordered_json::array({"held"}));
  EXPECT_EQ(locks[1]["presence_checked_at"], "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(locks[2]["resource"], "short");
  EXPECT_EQ(locks[2]["presence"][0], "unknown");  // not checked yet
  EXPECT_EQ(locks[2]["presence_checked_at"], "");
}

TEST(StateView, AnElectionShowsItsLeaderTermAndTheCandidatesWaitingHere) {
  Snapshot s;
  s.locks = {Lock("jobs", 10, 30'000, true), Lock("plain", 10, 30'000, true)};
  s.locks[0].kind = LockKind::kElection;
  s.locks[0].fence = 7;
  s.locks[0].election = ElectionRecord{7, 1'700'000'000'000, R"({"value":"host-a:8080"})"};
  WaiterView candidate;
  candidate.resource = "jobs";
  candidate.session = 12;
  candidate.waited_ms = 300;
  candidate.peer.pid = 4243;
  candidate.peer.cmdline = "worker --elect";
  WaiterView other = candidate;
  other.resource = "plain";
  other.session = 13;
  s.waiter_list = {candidate, other};
  StateInputs in;
  in.snapshot = &s;
  in.stuck_after_ms = 60'000;
  const auto locks = StateView(in)["locks"];
  ASSERT_EQ(locks.size(), 2u);
  const auto& jobs = locks[0]["resource"] == "jobs" ? locks[0] : locks[1];
  const auto& plain = locks[0]["resource"] == "jobs" ? locks[1] : locks[0];
  EXPECT_EQ(jobs["kind"], "election");
  EXPECT_EQ(jobs["mode"], "exclusive");
  EXPECT_EQ(jobs["election"]["value"], "host-a:8080");
  EXPECT_EQ(jobs["election"]["term"], 7);
  ASSERT_EQ(jobs["election"]["candidates"].size(), 1u);
  EXPECT_EQ(jobs["election"]["candidates"][0]["pid"], 4243);
  EXPECT_EQ(jobs["election"]["candidates"][0]["session"], 12);
  EXPECT_EQ(jobs["election"]["candidates"][0]["cmdline"], "worker --elect");
  EXPECT_EQ(plain["kind"], "mutex");
  EXPECT_TRUE(plain["election"].is_null());
}

TEST(StateView, ListsTheSnapshotsLocksStuckFirstAndCountsAllHeld) {
  Snapshot s;
  for (size_t i = 0; i < kMaxListedLocks; ++i) {
    s.locks.push_back(Lock("r" + std::to_string(i), 10, 1000, true));
  }
  s.locks.back() = Lock("stuck", 1, 7'200'000, false);  // the last one, and the only stuck one
  s.locks_held = kMaxListedLocks + 5;  // more are held than the snapshot lists
  StateInputs in;
  in.snapshot = &s;
  in.stuck_after_ms = 60'000;
  const auto view = StateView(in);
  EXPECT_EQ(view["locks_total"], kMaxListedLocks + 5);
  ASSERT_EQ(view["locks"].size(), kMaxListedLocks);
  EXPECT_EQ(view["locks"][0]["resource"], "stuck");
}

TEST(StateView, ActionsSayHowToEnableThem) {
  Snapshot s;
  StateInputs in;
  in.snapshot = &s;
  auto view = StateView(in);
  EXPECT_EQ(view["actions"]["enabled"], false);
  EXPECT_NE(view["actions"]["how_to_enable"].get<std::string>().find("admin_token_file"),
            std::string::npos);
  in.actions_enabled = true;
  view = StateView(in);
  EXPECT_EQ(view["actions"]["how_to_enable"], "");
}

TEST(StateView, MasterCardsCarryScannerCountsOnlyAfterAGoodPass) {
  Snapshot s;
  s.masters.resize(2);
  s.masters[0].rtt_p99_ms = 1.5;
  ScanReport report;
  report.masters.push_back({"a:1", true, "", 10, 0.1, 1, 7});
  report.masters.push_back({"b:1", false, "connection refused", 0, 0.1, 1, 0});
  Finding f;
  f.master = 0;
  f.key = "lock:x";
  report.findings.push_back(f);
  StateInputs in;
  in.snapshot = &s;
  in.leaks = &report;
  const auto view = StateView(in);
  EXPECT_EQ(view["masters"][0]["lock_keys"], 7);
  EXPECT_EQ(view["masters"][0]["leaked_keys"], 1);
  EXPECT_EQ(view["masters"][0]["rtt_p99_ms"], 1.5);
  EXPECT_TRUE(view["masters"][0]["rtt_p50_ms"].is_null());
  EXPECT_TRUE(view["masters"][1]["lock_keys"].is_null());
  EXPECT_TRUE(view["masters"][1]["uptime_s"].is_null());
}

TEST(StateView, HistoryNamesItsOutcomes) {
  Snapshot s;
  StateInputs in;
  in.snapshot = &s;
  HistoryPoint p;
  p.t_unix_ms = 5000;
  p.outcomes = {3, 1, 0, 0};
  in.history = {p};
  const auto view = StateView(in);
  EXPECT_EQ(view["history"]["bucket_ms"], 5000);
  EXPECT_EQ(view["history"]["points"][0]["acquired"], 3);
  EXPECT_EQ(view["history"]["points"][0]["timeout"], 1);
  EXPECT_TRUE(view["history"]["points"][0]["wait_p99_ms"].is_null());
}

TEST(LeaksView, NeverThrowsOnBinaryKeys) {
  ScanReport report;
  report.masters.push_back({"127.0.0.1:1", true, "", 1, 0.1, 1});
  Finding f;
  f.key = std::string("lock:\xff\xfe", 7);
  report.findings.push_back(f);
  const std::string text = Dump(LeaksView(&report, 1000));
  EXPECT_NE(text.find("lock:"), std::string::npos);
  EXPECT_NE(text.find("\"type\":\"no_ttl\""), std::string::npos);
}

TEST(ReadinessOf, ReadyWithAQuorumOfUsableMasters) {
  Snapshot s;
  s.quorum = 3;
  s.masters.resize(5);
  s.masters_up = 5;
  s.masters_usable = 3;
  Readiness r = ReadinessOf(s);
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.reason, "5 of 5 masters up (2 in restart quarantine), 3 usable, quorum 3");
  s.masters_usable = 2;
  EXPECT_FALSE(ReadinessOf(s).ready);
  s.masters_up = s.masters_usable = 4;
  EXPECT_EQ(ReadinessOf(s).reason, "4 of 5 masters up, 4 usable, quorum 3");
  EXPECT_FALSE(ReadinessOf(Snapshot{}).ready);  // nothing known yet
}

TEST(AdminErrors, BodyAndStatusComeFromTheFailure) {
  EXPECT_EQ(Dump(ErrorView({ErrorCode::kNotHeld, "nobody holds it"})),
            "{\"ok\":false,\"error\":\"not_held\",\"message\":\"nobody holds it\"}\n");
  const std::pair<ErrorCode, int> expected[] = {
      {ErrorCode::kBadRequest, 400}, {ErrorCode::kUnauthorized, 401},
      {ErrorCode::kForbidden, 403},  {ErrorCode::kNotFound, 404},
      {ErrorCode::kNotHeld, 404},    {ErrorCode::kStale, 409},
      {ErrorCode::kScannerOff, 409}, {ErrorCode::kInternal, 500},
      {ErrorCode::kMasterError, 502}, {ErrorCode::kUnavailable, 503},
      {ErrorCode::kStarting, 503},   {ErrorCode::kTooMany, 503}};
  for (const auto& [code, status] : expected) {
    EXPECT_EQ(HttpStatusOf(code), status) << ErrorCodeName(code);
  }
  for (const char* name : {"unauthorized", "not_found", "stale", "scanner_off", "master_error",
                           "unavailable", "starting"}) {
    auto code = ErrorCodeFromName(name);
    ASSERT_TRUE(code) << name;
    EXPECT_EQ(ErrorCodeName(*code), name);
  }
}

TEST(AdminStats, EverySeriesExistsFromTheStart) {
  stats::Registry registry;
  AdminStats admin(registry);
  admin.Count(AdminAction::kForceRelease, ActionResult::kStale);
  admin.Count(AdminRefusal::kTooManyConnections);
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find("# HELP lockwarden_admin_actions_total Operator actions on the admin API, "
                      "by action and result."),
            std::string::npos);
  EXPECT_NE(text.find("lockwarden_admin_actions_total{action=\"expire_key\",result=\"refused\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("lockwarden_admin_actions_total{action=\"force_release\",result=\"stale\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("# HELP lockwarden_admin_refusals_total Requests and connections the admin "
                      "HTTP server refused, by reason."),
            std::string::npos);
  EXPECT_NE(text.find("lockwarden_admin_refusals_total{reason=\"too_many_connections\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("lockwarden_admin_refusals_total{reason=\"timeout\"} 0"), std::string::npos);
}

using Listen = std::variant<std::optional<ListenAddress>, std::string>;

TEST(ParseListenAddress, AcceptsLiteralsAndOff) {
  auto v4 = ParseListenAddress("127.0.0.1:9477");
  ASSERT_TRUE(std::holds_alternative<std::optional<ListenAddress>>(v4));
  EXPECT_EQ(std::get<0>(v4)->host, "127.0.0.1");
  EXPECT_EQ(std::get<0>(v4)->port, 9477);
  auto v6 = ParseListenAddress("[::1]:0");
  ASSERT_EQ(v6.index(), 0u);
  EXPECT_EQ(std::get<0>(v6)->host, "::1");
  auto off = ParseListenAddress("off");
  ASSERT_EQ(off.index(), 0u);
  EXPECT_FALSE(std::get<0>(off).has_value());
}

TEST(ParseListenAddress, RefusesWhatWouldNotMeanWhatItSays) {
  for (const char* bad : {"9477", ":9477", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:x",
                          "example.com:9477", "[::1:9477", "[nope]:1"}) {
    EXPECT_EQ(ParseListenAddress(bad).index(), 1u) << bad;
  }
}

}  // namespace
}  // namespace lw
