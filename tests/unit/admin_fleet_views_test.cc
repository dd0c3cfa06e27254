// The admin API's JSON views of the fleet (admin/fleet_views.h), over views built by hand: what
// they show of agents, holders and waiters, and what they never show (a lock's value or token).

#include <gtest/gtest.h>

#include "admin/fleet_views.h"
#include "admin/views.h"

namespace lw {
namespace {

using nlohmann::ordered_json;

constexpr char kAgentA[] = "aaaaaaaaaaaaaaaa";
constexpr char kAgentB[] = "bbbbbbbbbbbbbbbb";
constexpr char kGoneAgent[] = "dddddddddddddddd";
constexpr char kGrantToken[] = "f00dfeedf00dfeedf00dfeedf00dfeed";

fleet::FleetAgent Agent(const std::string& id, const std::string& name) {
  fleet::FleetAgent a;
  a.record.id = id;
  a.record.name = name;
  a.record.host = name + ".example";
  a.record.pid = 100;
  a.record.version = "0.1.0";
  a.record.settings.key_prefix = "lock:";
  a.record.settings.max_ttl_ms = 60'000;
  a.heartbeat_age_ms = 1'200;
  a.masters = 5;
  return a;
}

fleet::FleetWaiter WaiterAt(const std::string& agent_id, const std::string& name,
                          const std::string& resource, int64_t waited_ms) {
  fleet::FleetWaiter w;
  w.agent_id = agent_id;
  w.agent_name = name;
  w.detail.resource = resource;
  w.detail.pid = 4242;
  w.detail.uid = 1000;
  w.detail.cmdline = "lockwarden lock --wait 30s " + resource + " -- true";
  w.waited_ms = waited_ms;
  return w;
}

// Three agents' worth: b holds fleet:job (a waits for it), a gone agent holds fleet:old, and a
// waits for fleet:next that nobody holds; a's max_ttl_ms drifts.
fleet::FleetView SampleView() {
  fleet::FleetView v;
  v.read_unix_ms = 1'700'000'000'000;
  v.read_seconds = 0.02;
  v.quorum = 3;
  v.masters_read = 5;
  v.complete = true;
  for (int i = 0; i < 5; ++i) {
    fleet::MasterRead m;
    m.master = "127.0.0.1:700" + std::to_string(i);
    m.ok = true;
    v.masters.push_back(m);
  }
  v.agents = {Agent(kAgentA, "alpha"), Agent(kAgentB, "bravo")};
  v.agents[0].record.settings.max_ttl_ms = 30'000;
  v.agents[0].drift = {"max_ttl_ms 30000, the fleet's 60000"};

  fleet::FleetLock job;
  job.resource = "fleet:job";
  job.key = "lock:fleet:job";
  job.value = fleet::LockValue(kAgentB, kGrantToken);
  job.state = fleet::HolderState::kLive;
  job.agent_id = kAgentB;
  job.agent_name = "bravo";
  job.host = "bravo.example";
  Hold d;
  d.resource = "fleet:job";
  d.holder.pid = 31337;
  d.holder.uid = 1000;
  d.holder.cmdline = "lockwarden lock fleet:job -- sleep 60";
  d.held_since_unix_ms = v.read_unix_ms - 5'000;
  d.ttl_ms = 30'000;
  d.renew = true;
  d.fence = 7;
  d.waiters = 0;
  job.detail = d;
  job.masters = {0, 1, 2, 3, 4};
  job.quorum = true;
  job.validity_ms = 25'000;
  job.held_ms = 5'000;
  job.waiters = {WaiterAt(kAgentA, "alpha", "fleet:job", 1'500)};

  fleet::FleetLock old;
  old.resource = "fleet:old";
  old.key = "lock:fleet:old";
  old.value = fleet::LockValue(kGoneAgent, kGrantToken);
  old.state = fleet::HolderState::kGone;
  old.agent_id = kGoneAgent;
  old.masters = {1, 3, 4};
  old.quorum = true;
  old.validity_ms = 9'000;
  old.stuck_reason = "held longer than 5m 00s";

  v.locks = {old, job};
  v.locks_total = 2;
  v.waiting_unheld = {WaiterAt(kAgentA, "alpha", "fleet:next", 800)};
  v.keys = 2;
  return v;
}

fleet::AgentRecord Self() {
  fleet::AgentRecord self;
  self.id = "cccccccccccccccc";
  self.name = "charlie";
  return self;
}

std::string Text(const ordered_json& j) { return Dump(j); }

TEST(FleetJson, ShowsTheHolderAndTheWaitersOfEveryAgentButNeverAValueOrToken) {
  const fleet::FleetView view = SampleView();
  const ordered_json j = FleetJson(view, Self(), {});
  const std::string text = Text(j);
  EXPECT_EQ(text.find(kGrantToken), std::string::npos) << text;
  EXPECT_EQ(text.find("\"value\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"token\""), std::string::npos) << text;

  EXPECT_EQ(j["self"]["name"], "charlie");
  EXPECT_EQ(j["locks_total"], 2);
  ASSERT_EQ(j["locks"].size(), 2u);
  const auto& job = j["locks"][1];
  EXPECT_EQ(job["resource"], "fleet:job");
  EXPECT_EQ(job["holder"]["state"], "live");
  EXPECT_EQ(job["holder"]["agent_name"], "bravo");
  EXPECT_EQ(job["holder"]["pid"], 31337);
  EXPECT_EQ(job["holder"]["cmdline"], "lockwarden lock fleet:job -- sleep 60");
  EXPECT_EQ(job["holder"]["fence"], 7);
  EXPECT_EQ(job["masters"].size(), 5u);
  EXPECT_EQ(job["masters"][0], "127.0.0.1:7000");
  ASSERT_EQ(job["waiters"].size(), 1u);
  EXPECT_EQ(job["waiters"][0]["agent_name"], "alpha");
  EXPECT_EQ(job["waiters"][0]["waited_ms"], 1'500);
  EXPECT_EQ(j["waiting_unheld"][0]["resource"], "fleet:next");
}

TEST(FleetJson, AGoneHolderIsShownAsGoneWithoutDetail) {
  const ordered_json j = FleetJson(SampleView(), Self(), {});
  const auto& old = j["locks"][0];
  EXPECT_EQ(old["resource"], "fleet:old");
  EXPECT_EQ(old["holder"]["state"], "gone");
  EXPECT_EQ(old["holder"]["agent_id"], kGoneAgent);
  EXPECT_EQ(old["holder"]["pid"], -1);
  EXPECT_EQ(old["holder"]["held_ms"], -1);
  EXPECT_TRUE(old["holder"]["fence"].is_null());
  EXPECT_TRUE(old["stuck"]);
  EXPECT_EQ(old["masters"], ordered_json::array({"127.0.0.1:7001", "127.0.0.1:7003",
                                                 "127.0.0.1:7004"}));
}

TEST(FleetJson, ADriftingAgentCarriesItsReasons) {
  const ordered_json j = FleetJson(SampleView(), Self(), {});
  ASSERT_EQ(j["agents"].size(), 2u);
  EXPECT_EQ(j["agents"][0]["name"], "alpha");
  EXPECT_EQ(j["agents"][0]["drift"], ordered_json::array({"max_ttl_ms 30000, the fleet's 60000"}));
  EXPECT_EQ(j["agents"][0]["settings"]["max_ttl_ms"], 30'000);
  EXPECT_TRUE(j["agents"][1]["drift"].empty());
  EXPECT_TRUE(j["agents"][1]["up"]);
}

TEST(FleetJson, ThePrefixAndLimitSelectRows) {
  const fleet::FleetView view = SampleView();
  const ordered_json only_job = FleetJson(view, Self(), {"fleet:j", 10});
  ASSERT_EQ(only_job["locks"].size(), 1u);
  EXPECT_EQ(only_job["locks"][0]["resource"], "fleet:job");
  EXPECT_EQ(only_job["locks_total"], 2);  // what the fleet holds, not what was selected
  EXPECT_TRUE(only_job["waiting_unheld"].empty());
  EXPECT_EQ(only_job["rows_complete"], true);  // the view kept every row
  EXPECT_EQ(FleetJson(view, Self(), {"", 1})["locks"].size(), 1u);
}

TEST(FleetJson, APrefixTheReadKeptNoRowsForIsSaidToBeIncomplete) {
  fleet::FleetView view = SampleView();
  view.locks_total = 5000;  // the read kept the first rows of "" and of "fleet:j" only
  view.keep = 1000;
  view.kept_for = {"", "fleet:j"};
  EXPECT_EQ(FleetJson(view, Self(), {"", 10})["rows_complete"], true);
  EXPECT_EQ(FleetJson(view, Self(), {"fleet:j", 10})["rows_complete"], true);
  const ordered_json other = FleetJson(view, Self(), {"fleet:n", 10});
  EXPECT_EQ(other["rows_complete"], false);
  EXPECT_EQ(other["locks_total"], 5000);
}

TEST(WhoJson, AHeldResourceIsItsRow) {
  const ordered_json j = WhoJson(SampleView(), Self(), "fleet:job");
  EXPECT_TRUE(j["held"]);
  EXPECT_EQ(j["holder"]["agent_name"], "bravo");
  EXPECT_EQ(j["waiters"][0]["agent_name"], "alpha");
  EXPECT_EQ(Text(j).find(kGrantToken), std::string::npos);
}

TEST(WhoJson, AnUnheldResourceListsItsWaiters) {
  const ordered_json j = WhoJson(SampleView(), Self(), "fleet:next");
  EXPECT_FALSE(j["held"]);
  ASSERT_EQ(j["waiters"].size(), 1u);
  EXPECT_EQ(j["waiters"][0]["agent_name"], "alpha");
  EXPECT_TRUE(WhoJson(SampleView(), Self(), "nobody")["waiters"].empty());
}

TEST(ParseFleetQuery, DefaultsAndBounds) {
  auto q = ParseFleetQuery("", "");
  ASSERT_TRUE(std::holds_alternative<FleetQuery>(q));
  EXPECT_EQ(std::get<FleetQuery>(q).limit, kDefaultFleetRows);
  EXPECT_EQ(std::get<FleetQuery>(ParseFleetQuery("orders:", "1000")).limit, 1000u);
  for (const char* bad : {"0", "1001", "-1", "ten", "5x", " 5"}) {
    auto refused = ParseFleetQuery("", bad);
    ASSERT_TRUE(std::holds_alternative<Failure>(refused)) << bad;
    EXPECT_EQ(std::get<Failure>(refused).code, ErrorCode::kBadRequest);
    EXPECT_NE(std::get<Failure>(refused).message.find("limit"), std::string::npos);
  }
  auto control = ParseFleetQuery(std::string("a\x01", 2), "");
  ASSERT_TRUE(std::holds_alternative<Failure>(control));
  EXPECT_NE(std::get<Failure>(control).message.find("prefix"), std::string::npos);
}

TEST(ParseWhoQuery, NeedsAValidResource) {
  EXPECT_TRUE(std::holds_alternative<Failure>(ParseWhoQuery("")));
  EXPECT_TRUE(std::holds_alternative<Failure>(ParseWhoQuery(std::string(300, 'x'))));
  EXPECT_EQ(std::get<std::string>(ParseWhoQuery("fleet:job")), "fleet:job");
}

TEST(RevokeJson, NamesHowAndTheHolderAgent) {
  fleet::RevokeResult r;
  r.how = fleet::RevokeResult::How::kByHolderAgent;
  r.agent_id = kAgentB;
  r.receivers = 1;
  r.masters_read = 5;
  const ordered_json j = RevokeJson(r);
  EXPECT_EQ(j["agent_id"], kAgentB);
  EXPECT_EQ(j["receivers"], 1);
  EXPECT_EQ(j["masters_read"], 5);
}

TEST(StateView, ListsThisAgentsWaitersAndItsIdentity) {
  Snapshot s;
  s.quorum = 3;
  s.waiters = 1;
  s.oldest_wait_ms = 2'500;
  WaiterView w;
  w.resource = "fleet:job";
  w.session = 9;
  w.waited_ms = 2'500;
  w.wait_ms = 30'000;
  w.peer.pid = 77;
  w.peer.cmdline = "lockwarden lock --wait 30s fleet:job -- true";
  s.waiter_list = {w};
  StateInputs in;
  in.snapshot = &s;
  in.agent_id = kAgentA;
  in.agent_name = "alpha";
  const ordered_json j = StateView(in);
  EXPECT_EQ(j["waiters"], 1);  // the count, as before
  EXPECT_EQ(j["oldest_wait_ms"], 2'500);
  ASSERT_EQ(j["waiter_list"].size(), 1u);
  EXPECT_EQ(j["waiter_list"][0]["resource"], "fleet:job");
  EXPECT_EQ(j["waiter_list"][0]["pid"], 77);
  EXPECT_EQ(j["waiter_list"][0]["waited_ms"], 2'500);
  EXPECT_EQ(j["waiter_list"][0]["wait_ms"], 30'000);
  EXPECT_EQ(j["agent"]["id"], kAgentA);
  EXPECT_EQ(j["agent"]["name"], "alpha");
}

// Two permits of a semaphore of 4 and a reader: their mode, n of K, and hold ids.
fleet::FleetView KindsView() {
  fleet::FleetView v = SampleView();
  v.locks.clear();
  for (int permit : {0, 2}) {
    fleet::FleetLock l;
    l.resource = "pool";
    l.key = PermitKey("lock:", "pool", permit);
    l.value = fleet::LockValue(kAgentA, kGrantToken + std::to_string(permit));
    l.hold_id = fleet::HoldId(l.value);
    l.mode = HoldMode::kPermit;
    l.permit = permit;
    l.permits = 4;
    l.masters = {0, 1, 2};
    l.quorum = true;
    v.locks.push_back(l);
  }
  fleet::FleetLock reader;
  reader.resource = "cfg";
  reader.key = ReadersKey("lock:", "cfg");
  reader.value = fleet::LockValue(kAgentB, kGrantToken);
  reader.hold_id = fleet::HoldId(reader.value);
  reader.mode = HoldMode::kShared;
  reader.masters = {0, 1, 2};
  reader.quorum = true;
  v.locks.push_back(reader);
  v.resources = {{"cfg", LockKind::kMutex, 0, 0, 1, false, true},
                 {"pool", LockKind::kSemaphore, 4, 2, 0, false, false}};
  return v;
}

TEST(FleetJson, PermitsAndReadersShowTheirModeAndTheResourceAsAWhole) {
  const fleet::FleetView view = KindsView();
  const ordered_json j = FleetJson(view, Self(), {});
  const std::string text = Text(j);
  EXPECT_EQ(text.find(kGrantToken), std::string::npos) << text;
  EXPECT_EQ(text.find("\\u001f"), std::string::npos) << "a raw key is shown: " << text;
  ASSERT_EQ(j["locks"].size(), 3u);
  const auto& permit = j["locks"][1];
  EXPECT_EQ(permit["mode"], "permit");
  EXPECT_EQ(permit["permit"], 2);
  EXPECT_EQ(permit["permits"], 4);
  EXPECT_EQ(permit["hold_id"], view.locks[1].hold_id);
  EXPECT_EQ(permit["shape"]["kind"], "semaphore");
  EXPECT_EQ(permit["shape"]["permits_held"], 2);
  const auto& reader = j["locks"][2];
  EXPECT_EQ(reader["mode"], "shared");
  EXPECT_TRUE(reader["permit"].is_null());
  EXPECT_EQ(reader["shape"]["readers"], 1);
  EXPECT_EQ(reader["shape"]["writer_waiting"], true);
  const ordered_json who = WhoJson(view, Self(), "pool");
  EXPECT_EQ(who["holds"].size(), 2u);
}

TEST(FleetJson, AnElectionRowNamesItsLeaderAndTermAndTheResourceItsKind) {
  fleet::FleetView v;
  v.masters.resize(3);
  fleet::FleetLock l;
  l.resource = "jobs";
  l.key = "lock:jobs";
  l.value = fleet::LockValue(kAgentA, kGrantToken);
  l.hold_id = fleet::HoldId(l.value);
  l.masters = {0, 1, 2};
  l.quorum = true;
  l.election = ElectionRecord{7, 1'700'000'000'000,
                              R"({"value":"host-a:8080","agent":"a1","host":"h","pid":42})"};
  v.locks.push_back(l);
  l.resource = "odd";
  l.election = ElectionRecord{2, 0, R"({"value":5,"pid":"x"})"};  // from the masters: untrusted
  v.locks.push_back(l);
  v.resources = {{"jobs", LockKind::kElection, 0, 0, 0, true, false},
                 {"odd", LockKind::kElection, 0, 0, 0, true, false}};
  const ordered_json j = FleetJson(v, Self(), {});
  EXPECT_EQ(Text(j).find(kGrantToken), std::string::npos);
  const auto& jobs = j["locks"][0];
  EXPECT_EQ(jobs["shape"]["kind"], "election");
  EXPECT_EQ(jobs["election"]["term"], 7);
  EXPECT_EQ(jobs["election"]["value"], "host-a:8080");
  EXPECT_EQ(jobs["election"]["pid"], 42);
  EXPECT_EQ(jobs["election"]["since_unix_ms"], 1'700'000'000'000);
  EXPECT_TRUE(j["locks"][1]["election"]["value"].is_null());
  EXPECT_TRUE(j["locks"][1]["election"]["pid"].is_null());
  v.locks.pop_back();
  v.locks[0].election.reset();
  EXPECT_TRUE(FleetJson(v, Self(), {})["locks"][0]["election"].is_null());
}

TEST(ParseFleetRevokeBody, NamesTheHoldOrThePermit) {
  auto plain = ParseFleetRevokeBody(R"({"resource": "cfg"})");
  ASSERT_TRUE(std::holds_alternative<fleet::RevokeRequest>(plain));
  EXPECT_EQ(std::get<fleet::RevokeRequest>(plain).resource, "cfg");
  EXPECT_FALSE(std::get<fleet::RevokeRequest>(plain).permit);
  auto held = ParseFleetRevokeBody(R"({"resource": "pool", "permit": 3, "hold": "0123456789abcdef"})");
  ASSERT_TRUE(std::holds_alternative<fleet::RevokeRequest>(held));
  EXPECT_EQ(std::get<fleet::RevokeRequest>(held).permit, 3);
  EXPECT_EQ(std::get<fleet::RevokeRequest>(held).hold, "0123456789abcdef");
  for (const char* bad :
       {R"({})", R"([])", R"({"resource": 5})", R"({"resource": "a", "permit": 1024})",
        R"({"resource": "a", "permit": -1})", R"({"resource": "a", "hold": "XYZ"})",
        R"({"resource": "a", "extra": 1})", "not json"}) {
    auto r = ParseFleetRevokeBody(bad);
    ASSERT_TRUE(std::holds_alternative<Failure>(r)) << bad;
    EXPECT_EQ(std::get<Failure>(r).code, ErrorCode::kBadRequest) << bad;
  }
  auto named = ParseFleetRevokeBody(R"({"resource": "a", "permit": 1024})");
  EXPECT_NE(std::get<Failure>(named).message.find("\"permit\""), std::string::npos);
}

}  // namespace
}  // namespace lw
