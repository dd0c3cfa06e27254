// Leader election across agents, against real masters and real agent processes: campaign,
// resign, leader and observe on the socket, and `lockwarden elect` / `lockwarden leader`.
// Leadership changes hands when the leader's process dies (its connection closes: released at
// once) and when the leader's agent dies (its hold expires within its ttl); observers on every
// agent hear each change in term order.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/unix_time.h"
#include "fleet/records.h"
#include "redis/scripts.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::election {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// Only ends a failing test: everything awaited here happens far sooner on a working agent.
constexpr milliseconds kAwait{30'000};

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// A campaign whose reply (it comes once elected) the test reads later with Reply.
void SendCampaign(lw::client::Client& c, const std::string& name, const std::string& value,
                  int64_t ttl_ms, int64_t wait_ms) {
  c.SendRaw(json{{"id", "campaign"}, {"op", "campaign"}, {"name", name}, {"value", value},
                 {"ttl_ms", ttl_ms}, {"wait_ms", wait_ms}}
                .dump() +
            "\n");
}

// The next line of a connection that gets nothing but the reply it waits for.
json Reply(lw::client::Client& c) {
  auto line = c.ReadLine(kAwait);
  if (!line) return json{{"error", "no reply in time"}};
  return json::parse(*line);
}

// `leader` events of `name` until one names `value` (or the deadline passes), in order.
std::vector<json> EventsUntilLeader(lw::client::Client& c, const std::string& value) {
  std::vector<json> events;
  const auto end = SteadyClock::now() + kAwait;
  while (SteadyClock::now() < end) {
    auto e = c.NextEvent(std::chrono::duration_cast<milliseconds>(end - SteadyClock::now()));
    if (!e) break;
    events.push_back(*e);
    if ((*e)["leader"].is_object() && (*e)["leader"]["value"] == value) break;
  }
  return events;
}

// Every event is a `leader` event of `name`, terms never go down, the first is not below
// `after`, and the last names `value` with `term`.
void ExpectTermOrderEndingWith(const std::vector<json>& events, const std::string& name,
                               int64_t after, const std::string& value, int64_t term) {
  ASSERT_FALSE(events.empty());
  int64_t last = after;
  for (const json& e : events) {
    EXPECT_EQ(e["event"], "leader") << e;
    EXPECT_EQ(e["name"], name) << e;
    EXPECT_GE(e["term"].get<int64_t>(), last) << "a lower term after a higher one: " << e;
    last = e["term"].get<int64_t>();
  }
  ASSERT_TRUE(events.back()["leader"].is_object()) << events.back();
  EXPECT_EQ(events.back()["leader"]["value"], value) << events.back();
  EXPECT_EQ(events.back()["term"], term) << events.back();
  EXPECT_EQ(events.back()["leader"]["term"], term) << events.back();
}

class ElectionTest : public ::testing::Test {
 protected:
  // `lockwarden elect --socket <agent's> ARGS`, its output in <agent dir>/elect.out.
  pid_t Elect(const AgentProcess& agent, std::vector<std::string> args) {
    std::vector<std::string> argv = {LockwardenBinary(), "elect", "--socket", agent.socket_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return SpawnTestProcess(argv, agent.dir() + "/elect.out");
  }
  // `lockwarden leader --socket <agent's> ARGS` run to its end: exit code and stdout+stderr.
  std::pair<int, std::string> LeaderCli(const AgentProcess& agent, std::vector<std::string> args) {
    const std::string out = agent.dir() + "/leader.out";
    std::remove(out.c_str());
    std::vector<std::string> argv = {LockwardenBinary(), "leader", "--socket",
                                     agent.socket_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = SpawnTestProcess(argv, out);
    const int code = WaitChild(pid, kAwait);
    return {code, ReadFile(out)};
  }
  // True when every master counts n subscribers of `channel`.
  bool OnEveryMaster(const std::string& channel, int64_t n) const {
    for (int i = 0; i < cluster_.size(); ++i) {
      if (cluster_.NumSub(i, channel) != n) return false;
    }
    return true;
  }
  // Waits until `agents` agents listen for `name`'s announcements on every master (one
  // connection per agent and master): a change made after this reaches their observers by its
  // announcement, however slowly the subscriptions came up.
  void AwaitListening(const std::string& name, int64_t agents) {
    ASSERT_TRUE(Eventually(
        [&] { return OnEveryMaster(scripts::ReleaseChannel(KeyOf(name)), agents); }, kAwait))
        << "agents listening for " << name;
  }
  // The agent id in the value a key holds on master 0 ("" if missing).
  std::string AgentOf(const std::string& name) {
    return fleet::AgentOfValue(cluster_.Get(0, KeyOf(name)).value_or("")).value_or("");
  }

  RedisCluster cluster_{3};
  // Reading again every minute only: within the awaits below, observers hear of a change only
  // through its announcement on the masters (PollingTellsObservers... tests the fallback).
  AgentProcess a_{cluster_, {"--election-poll-ms", "60000"}};
  AgentProcess b_{cluster_, {"--election-poll-ms", "60000"}};
};

TEST_F(ElectionTest, LeadersProcessKilledHandsLeadershipToTheOtherAgentAndObserversHearIt) {
  auto observer_a = a_.Connect();
  auto observer_b = b_.Connect();
  for (auto* o : {&observer_a, &observer_b}) {
    const json r = o->Observe("jobs");
    ASSERT_TRUE(r.value("ok", false)) << r;
    EXPECT_TRUE(r["leader"].is_null()) << r;
  }
  AwaitListening("jobs", 2);

  // The leader: `lockwarden elect` on agent a, with a ttl (60 s) far beyond every wait below,
  // so that leadership can change hands within them only by its connection closing.
  Fifo fifo(a_.dir() + "/fifo");
  const pid_t elect = Elect(a_, {"--value", "host-a:8080", "--ttl", "60s", "jobs", "--", "sh",
                                 "-c", "echo \"$$ $LOCKWARDEN_TERM\" > " + fifo.path() +
                                           "; exec sleep 600"});
  const std::string started = fifo.ReadLine(kAwait);
  ASSERT_THAT(started, ::testing::MatchesRegex("[0-9]+ [0-9]+")) << ReadFile(a_.dir() + "/elect.out");
  const pid_t command = std::stoi(started.substr(0, started.find(' ')));
  const int64_t term_a = std::stoll(started.substr(started.find(' ') + 1));
  for (auto* o : {&observer_a, &observer_b}) {
    ExpectTermOrderEndingWith(EventsUntilLeader(*o, "host-a:8080"), "jobs", 0, "host-a:8080",
                              term_a);
  }

  auto candidate = b_.Connect();
  SendCampaign(candidate, "jobs", "host-b:9090", 60'000, kAwait.count());
  kill(elect, SIGKILL);
  EXPECT_EQ(WaitChild(elect, kAwait), 128 + SIGKILL);
  kill(-command, SIGKILL);  // the command's own process group, orphaned by the kill

  const json elected = Reply(candidate);
  ASSERT_TRUE(elected.value("ok", false)) << elected << b_.Log();
  const int64_t term_b = elected["term"];
  EXPECT_GT(term_b, term_a);
  EXPECT_GE(cluster_.CountHoldingGrant(KeyOf("jobs"), elected["token"]), 2);
  for (auto* o : {&observer_a, &observer_b}) {
    ExpectTermOrderEndingWith(EventsUntilLeader(*o, "host-b:9090"), "jobs", term_a,
                              "host-b:9090", term_b);
  }
}

TEST_F(ElectionTest, LeadersAgentKilledHandsLeadershipOverOnceItsTtlRunsOut) {
  AgentProcess c(cluster_);
  constexpr int64_t kTtlMs = 2'000;
  auto leader = a_.Connect();
  const json led = leader.Campaign("jobs", "host-a", kTtlMs, 0);
  ASSERT_TRUE(led.value("ok", false)) << led;
  const int64_t term_a = led["term"];
  auto observer_b = b_.Connect();
  auto observer_c = c.Connect();
  for (auto* o : {&observer_b, &observer_c}) {
    const json r = o->Observe("jobs");
    ASSERT_TRUE(r.value("ok", false)) << r;
    EXPECT_EQ(r["leader"]["value"], "host-a") << r;
    EXPECT_EQ(r["leader"]["term"], term_a) << r;
  }
  AwaitListening("jobs", 2);
  auto candidate = b_.Connect();
  SendCampaign(candidate, "jobs", "host-b", kTtlMs, kAwait.count());

  a_.Signal(SIGKILL);
  ASSERT_EQ(a_.WaitExit(kAwait), 128 + SIGKILL);
  // Nothing renews the dead agent's hold: it lives at most its ttl from now on every master.
  for (int i = 0; i < cluster_.size(); ++i) {
    const int64_t pttl = cluster_.Pttl(i, KeyOf("jobs"));
    EXPECT_LE(pttl, kTtlMs) << "master " << i;
    EXPECT_NE(pttl, -1) << "master " << i << ": a hold without expiry";
  }
  const json elected = Reply(candidate);
  ASSERT_TRUE(elected.value("ok", false)) << elected << b_.Log();
  const int64_t term_b = elected["term"];
  EXPECT_GT(term_b, term_a);
  EXPECT_GE(cluster_.CountHoldingGrant(KeyOf("jobs"), elected["token"]), 2)
      << "granted once the dead leader's hold had expired on a quorum";
  for (auto* o : {&observer_b, &observer_c}) {
    ExpectTermOrderEndingWith(EventsUntilLeader(*o, "host-b"), "jobs", term_a, "host-b", term_b);
  }
  const json now = c.Connect().Leader("jobs");
  EXPECT_EQ(now["leader"]["value"], "host-b") << now;
  EXPECT_EQ(now["leader"]["term"], term_b) << now;
}

TEST_F(ElectionTest, PollingTellsObserversOfAHoldThatExpiredUnannounced) {
  AgentProcess polling(cluster_, {"--election-poll-ms", "100"});
  auto leader = a_.Connect();
  const json led = leader.Campaign("jobs", "host-a", 1'000, 0);
  ASSERT_TRUE(led.value("ok", false)) << led;
  auto observer = polling.Connect();
  const json r = observer.Observe("jobs");
  ASSERT_EQ(r["leader"]["value"], "host-a") << r;
  // The leader's agent dies: its hold expires on the masters, which announce nothing.
  a_.Signal(SIGKILL);
  ASSERT_EQ(a_.WaitExit(kAwait), 128 + SIGKILL);
  auto gone = observer.NextEvent(kAwait);
  ASSERT_TRUE(gone.has_value()) << polling.Log();
  EXPECT_EQ(*gone, (json{{"event", "leader"}, {"name", "jobs"}, {"leader", nullptr},
                         {"term", led["term"]}, {"missed", false}}));
}

TEST_F(ElectionTest, ElectStopsItsCommandWhenLeadershipIsLost) {
  Fifo fifo(a_.dir() + "/fifo");
  const pid_t pid = Elect(a_, {"--value", "host-a", "--ttl", "1s", "--kill-grace", "2s",
                               "lost:job", "--", "sh", "-c",
                               "trap 'echo TERM > " + fifo.path() + "; exit 0' TERM; echo "
                               "\"started $LOCKWARDEN_TERM\" > " + fifo.path() +
                                   "; while :; do sleep 0.05; done"});
  ASSERT_THAT(fifo.ReadLine(kAwait), ::testing::MatchesRegex("started [0-9]+"))
      << ReadFile(a_.dir() + "/elect.out");
  // Two of three masters stopped: no renewal can reach a quorum, so the leadership ends when
  // its 1 s validity runs out, and the command is told (SIGTERM) then.
  cluster_.Stop(0);
  cluster_.Stop(1);
  EXPECT_EQ(fifo.ReadLine(kAwait), "TERM") << ReadFile(a_.dir() + "/elect.out");
  EXPECT_EQ(WaitChild(pid, kAwait), 72) << ReadFile(a_.dir() + "/elect.out");
  EXPECT_THAT(ReadFile(a_.dir() + "/elect.out"),
              HasSubstr("leadership of \"lost:job\" was lost"));
  cluster_.Cont(0);
  cluster_.Cont(1);
}

TEST_F(ElectionTest, ElectRunsTheCommandWhileLeadingAndResignsWhenItExits) {
  Fifo first(a_.dir() + "/first");
  const std::string go = a_.dir() + "/go";
  const pid_t one = Elect(a_, {"--value", "host-a", "jobs", "--", "sh", "-c",
                               "echo \"$LOCKWARDEN_TERM $LOCKWARDEN_FENCE $LOCKWARDEN_RESOURCE\" > " +
                                   first.path() + "; while [ ! -e " + go +
                                   " ]; do sleep 0.02; done; exit 3"});
  const std::string line = first.ReadLine(kAwait);
  ASSERT_THAT(line, ::testing::MatchesRegex("[0-9]+ [0-9]+ jobs")) << line;
  const int64_t term_one = std::stoll(line);
  EXPECT_EQ(line.substr(0, line.find(' ')), line.substr(line.find(' ') + 1, line.rfind(' ') -
                                                                                line.find(' ') - 1))
      << "LOCKWARDEN_FENCE is the term";

  Fifo second(b_.dir() + "/second");
  const pid_t two = Elect(b_, {"--value", "host-b", "jobs", "--", "sh", "-c",
                               "echo \"$LOCKWARDEN_TERM\" > " + second.path() + "; exec sleep 600"});
  EXPECT_EQ(b_.Connect().Leader("jobs")["leader"]["value"], "host-a");
  std::ofstream(go) << "go\n";
  EXPECT_EQ(WaitChild(one, kAwait), 3) << "the command's exit code passes through";
  const std::string term_two = second.ReadLine(kAwait);
  ASSERT_THAT(term_two, ::testing::MatchesRegex("[0-9]+")) << ReadFile(b_.dir() + "/elect.out");
  EXPECT_GT(std::stoll(term_two), term_one);
  const json led = a_.Connect().Leader("jobs");
  EXPECT_EQ(led["leader"]["value"], "host-b") << led;

  // SIGTERM goes on to the command; once it has ended, elect resigns and exits with its status.
  kill(two, SIGTERM);
  EXPECT_EQ(WaitChild(two, kAwait), 128 + SIGTERM);
  const json none = a_.Connect().Leader("jobs");
  EXPECT_TRUE(none["leader"].is_null()) << none;
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("jobs")), 0);
}

TEST_F(ElectionTest, LeaderFromAnyAgentNamesTheLeaderAndResignHandsOverInTermOrder) {
  auto leader = a_.Connect();
  const int64_t before = UnixMsNow();
  const json led = leader.Campaign("svc", "host-a:8080", 10'000, 0);
  const int64_t after = UnixMsNow();
  ASSERT_TRUE(led.value("ok", false)) << led;
  EXPECT_EQ(led["name"], "svc");
  EXPECT_THAT(led["token"].get<std::string>(), ::testing::MatchesRegex("[0-9a-f]{40}"));
  EXPECT_GT(led["validity_ms"].get<int64_t>(), 0);
  const int64_t term_a = led["term"];
  EXPECT_GE(term_a, 1);
  const std::string token = led["token"];

  // Asked through the other agent: what the campaign said of itself, and the record's term.
  const json who = b_.Connect().Leader("svc");
  ASSERT_TRUE(who.value("ok", false)) << who;
  EXPECT_EQ(who["name"], "svc");
  const json& l = who["leader"];
  EXPECT_EQ(l["value"], "host-a:8080") << who;
  EXPECT_EQ(l["agent"], AgentOf("svc")) << "the id of the agent whose value holds the key";
  EXPECT_EQ(l["agent"].get<std::string>().size(), 16u) << who;
  EXPECT_EQ(l["host"], HostName()) << who;
  EXPECT_EQ(l["pid"], getpid()) << "the campaigning process: this test";
  EXPECT_EQ(l["term"], term_a) << who;
  EXPECT_GE(l["since"].get<int64_t>(), before) << who;
  EXPECT_LE(l["since"].get<int64_t>(), after) << who;

  const auto [code, text] = LeaderCli(b_, {"svc"});
  EXPECT_EQ(code, 0) << text;
  EXPECT_THAT(text, HasSubstr("svc: host-a:8080 (term " + std::to_string(term_a) + "; agent " +
                              AgentOf("svc") + ", host " + HostName() + ", pid " +
                              std::to_string(getpid()) + ", since "));
  const auto [json_code, json_text] = LeaderCli(b_, {"svc", "--json"});
  EXPECT_EQ(json_code, 0) << json_text;
  EXPECT_EQ(json::parse(json_text)["leader"], l) << json_text;
  const std::string watch_out = b_.dir() + "/watch.out";
  const pid_t watch = SpawnTestProcess(
      {LockwardenBinary(), "leader", "--socket", b_.socket_path(), "--watch", "--json", "svc"},
      watch_out);
  ASSERT_TRUE(Eventually(
      [&] { return ReadFile(watch_out).find("host-a:8080") != std::string::npos; }, kAwait))
      << ReadFile(watch_out);

  auto observer_a = a_.Connect();
  auto observer_b = b_.Connect();
  for (auto* o : {&observer_a, &observer_b}) {
    const json r = o->Observe("svc");
    ASSERT_TRUE(r.value("ok", false)) << r;
    EXPECT_EQ(r["leader"], l) << r;
  }
  AwaitListening("svc", 2);

  // Leadership belongs to the campaigning connection and its token.
  EXPECT_EQ(leader.Resign("svc", std::string(40, 'f'))["error"], "not_held");
  EXPECT_EQ(a_.Connect().Resign("svc", token)["error"], "not_held");
  EXPECT_EQ(b_.Connect().Resign("svc", token)["error"], "not_held");
  EXPECT_EQ(b_.Connect().Leader("svc")["leader"]["term"], term_a);

  // resign ends a leadership only: a lock's hold with the same name stays held.
  auto locker = b_.Connect();
  const json lock = locker.Acquire("svc-lock", 60'000, 0);
  ASSERT_TRUE(lock.value("ok", false)) << lock;
  const json not_a_leader = locker.Resign("svc-lock", lock["token"]);
  EXPECT_EQ(not_a_leader["error"], "kind_mismatch") << not_a_leader;
  EXPECT_THAT(not_a_leader.value("message", ""), HasSubstr("a lock named"));
  EXPECT_TRUE(locker.Release("svc-lock", lock["token"]).value("ok", false));

  ASSERT_TRUE(leader.Resign("svc", token).value("ok", false));
  for (auto* o : {&observer_a, &observer_b}) {
    auto gone = o->NextEvent(kAwait);
    ASSERT_TRUE(gone.has_value());
    EXPECT_EQ(*gone, (json{{"event", "leader"}, {"name", "svc"}, {"leader", nullptr},
                           {"term", term_a}, {"missed", false}}));
  }
  const auto [none_code, none_text] = LeaderCli(a_, {"svc"});
  EXPECT_EQ(none_code, 1) << none_text;
  EXPECT_THAT(none_text, HasSubstr("svc: no leader"));

  auto next = b_.Connect();
  const json next_led = next.Campaign("svc", "host-b:8080", 10'000, 0);
  ASSERT_TRUE(next_led.value("ok", false)) << next_led;
  const int64_t term_b = next_led["term"];
  EXPECT_GT(term_b, term_a);
  for (auto* o : {&observer_a, &observer_b}) {
    ExpectTermOrderEndingWith(EventsUntilLeader(*o, "host-b:8080"), "svc", term_a,
                              "host-b:8080", term_b);
  }
  // The watching CLI printed the leader, nobody, then the next leader: one JSON line each.
  ASSERT_TRUE(Eventually(
      [&] { return ReadFile(watch_out).find("host-b:8080") != std::string::npos; }, kAwait))
      << ReadFile(watch_out);
  kill(watch, SIGTERM);
  WaitChild(watch, kAwait);
  std::vector<json> lines;
  std::istringstream in(ReadFile(watch_out));
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u) << ReadFile(watch_out);
  EXPECT_EQ(lines[0]["leader"]["value"], "host-a:8080");
  EXPECT_TRUE(lines[1]["leader"].is_null());
  EXPECT_EQ(lines[1]["term"], term_a);
  EXPECT_EQ(lines[2]["leader"]["value"], "host-b:8080");
  EXPECT_EQ(lines[2]["term"], term_b);
}

TEST_F(ElectionTest, ObservationsAreBoundedPerConnectionAndEndWithIt) {
  auto o = b_.Connect();
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(o.Observe("e" + std::to_string(i)).value("ok", false)) << i;
  }
  const json refused = o.Observe("e64");
  EXPECT_EQ(refused["error"], "too_many") << refused;
  EXPECT_THAT(refused.value("message", ""), HasSubstr("64"));
  EXPECT_TRUE(o.Observe("e0").value("ok", false)) << "observing a name again is no new one";
  EXPECT_TRUE(o.Unobserve("e1").value("ok", false));
  EXPECT_EQ(o.Unobserve("e1")["error"], "not_held");
  EXPECT_TRUE(o.Observe("e64").value("ok", false));

  // Its watches end with the connection.
  const std::string channel = scripts::ReleaseChannel(KeyOf("e0"));
  ASSERT_TRUE(Eventually([&] { return OnEveryMaster(channel, 1); }, kAwait));
  o.Close();
  EXPECT_TRUE(Eventually([&] { return OnEveryMaster(channel, 0); }, kAwait)) << b_.Log();
}

TEST_F(ElectionTest, AnObserverLeavingKeepsTheEnginesWatchForItsWaiter) {
  auto holder = a_.Connect();
  ASSERT_TRUE(holder.Campaign("w", "a", 60'000, 0).value("ok", false));
  auto waiter = b_.Connect();
  SendCampaign(waiter, "w", "b", 60'000, kAwait.count());
  const std::string channel = scripts::ReleaseChannel(KeyOf("w"));
  // The waiter backs off for a key held elsewhere: agent b listens for its release.
  ASSERT_TRUE(Eventually([&] { return OnEveryMaster(channel, 1); }, kAwait)) << b_.Log();

  auto observer = b_.Connect();
  ASSERT_TRUE(observer.Observe("w").value("ok", false));
  ASSERT_TRUE(observer.Unobserve("w").value("ok", false));
  // A marker observed after it: its SUBSCRIBE follows, on the same connection to each master,
  // any UNSUBSCRIBE the unobserve sent, so once the masters have the marker they have that too.
  ASSERT_TRUE(observer.Observe("marker").value("ok", false));
  ASSERT_TRUE(Eventually(
      [&] { return OnEveryMaster(scripts::ReleaseChannel(KeyOf("marker")), 1); }, kAwait));
  EXPECT_TRUE(OnEveryMaster(channel, 1)) << "the observer's unwatch ended the waiter's watch";

  ASSERT_TRUE(holder.Resign("w", holder.Held()["locks"][0]["token"]).value("ok", false));
  const json elected = Reply(waiter);
  EXPECT_TRUE(elected.value("ok", false)) << elected;
}

}  // namespace
}  // namespace lw::test::election
