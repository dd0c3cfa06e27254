// The fleet room against real masters, driven directly (no agent process): FleetPresence's
// registry entry, FleetReader's view of it and of lock keys, RevokeInFleet, and the reporter
// election.

#include <hiredis/hiredis.h>

#include <gtest/gtest.h>

#include <memory>

#include "core/lock_kind.h"
#include "core/unix_time.h"
#include "fleet/fleet_stats.h"
#include "fleet/presence.h"
#include "fleet/reader.h"
#include "fleet/records.h"
#include "fleet/revoke.h"
#include "redis/scripts.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::fleet_room {
namespace {

using namespace lw::fleet;

constexpr milliseconds kDeadline{10'000};

std::vector<MasterAddress> Masters(const RedisCluster& c) {
  std::vector<MasterAddress> out;
  for (int i = 0; i < c.size(); ++i) out.push_back({"127.0.0.1", c.port(i), "", "", {}});
  return out;
}

AgentRecord Record(const std::string& name) {
  AgentRecord r;
  r.id = NewAgentId();
  r.name = name;
  r.host = name + ".test";
  r.pid = 1234;
  r.version = "test";
  r.started_unix_ms = UnixMsNow();
  r.settings = {"lock:", 60'000, 0.01, true, "fence:", 0};
  return r;
}

std::unique_ptr<FleetPresence> Presence(const RedisCluster& c, const AgentRecord& record,
                                        FleetPresence::ReportFn report = nullptr,
                                        FleetStats* stats = nullptr) {
  PresenceSettings s;
  s.masters = Masters(c);
  s.record = record;
  s.heartbeat_ttl = milliseconds(600);
  auto p = std::make_unique<FleetPresence>(s, std::move(report), stats);
  p->Start();
  return p;
}

const FleetAgent* AgentIn(const FleetView& v, const std::string& id) {
  for (const FleetAgent& a : v.agents) {
    if (a.record.id == id) return &a;
  }
  return nullptr;
}

const FleetLock* LockIn(const FleetView& v, const std::string& resource) {
  for (const FleetLock& l : v.locks) {
    if (l.resource == resource) return &l;
  }
  return nullptr;
}

class FleetRoomTest : public ::testing::Test {
 protected:
  FleetRoomTest() {
    ReaderSettings s;
    s.masters = Masters(cluster_);
    s.refresh = milliseconds(20);
    reader_ = std::make_unique<FleetReader>(s, &stats_);
    reader_->Start();
  }

  // A view read after this call, or an empty one (the test then fails on what it expects).
  FleetView FreshView() {
    const int64_t asked = UnixMsNow();
    auto v = reader_->View(asked, milliseconds(5'000));
    const bool fresh = v && v->read_unix_ms > asked;
    EXPECT_TRUE(fresh) << "no fleet read within 5 s";
    return fresh ? *v : FleetView{};
  }

  // Waits until a fresh view satisfies `condition`; the last view read.
  FleetView ViewWhere(const std::function<bool(const FleetView&)>& condition) {
    FleetView v;
    Eventually([&] { return condition(v = FreshView()); }, kDeadline);
    return v;
  }

  RedisCluster cluster_{5};
  stats::Registry registry_;
  FleetStats stats_{registry_};
  std::unique_ptr<FleetReader> reader_;
};

TEST_F(FleetRoomTest, TwoPresencesAppearInTheViewWithTheirRecordsAndReports) {
  const AgentRecord a = Record("alpha"), b = Record("beta");
  // The same content at every heartbeat: written once, then only its ttl refreshed.
  const auto report = [since = UnixMsNow() - 1'000] {
    HolderReport r;
    r.locks_total = 1;
    Hold d;
    d.resource = "job";
    d.holder.pid = 321;
    d.holder.cmdline = "worker";
    d.held_since_unix_ms = since;
    d.ttl_ms = 30'000;
    d.renew = true;
    r.locks.push_back(d);
    return std::optional<HolderReport>(r);
  };
  auto pa = Presence(cluster_, a, report);
  auto pb = Presence(cluster_, b);
  reader_->KeepFresh(true);
  for (int i = 0; i < 3; ++i) cluster_.Set(i, "lock:job", LockValue(a.id, "tok"), 20'000);

  const FleetView v = ViewWhere([&](const FleetView& w) {
    return AgentIn(w, a.id) && AgentIn(w, b.id) && AgentIn(w, a.id)->masters == 5 &&
           AgentIn(w, b.id)->masters == 5 && AgentIn(w, a.id)->locks_total == 1;
  });
  const FleetAgent* fa = AgentIn(v, a.id);
  ASSERT_TRUE(fa && AgentIn(v, b.id));
  EXPECT_EQ(fa->record.name, "alpha");
  EXPECT_EQ(fa->record.host, "alpha.test");
  EXPECT_EQ(fa->record.heartbeat_ttl_ms, 600);
  EXPECT_EQ(fa->record.settings, a.settings);
  EXPECT_TRUE(fa->drift.empty());
  const FleetLock* job = LockIn(v, "job");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->state, HolderState::kLive);
  ASSERT_TRUE(job->detail);
  EXPECT_EQ(job->detail->holder.cmdline, "worker");
  EXPECT_GT(pa->heartbeats(), 0u);
  EXPECT_TRUE(Eventually([&] { return stats_.totals.agents.Value() == 2; }, kDeadline));
  EXPECT_EQ(stats_.totals.locks.Value(), 1);
  EXPECT_GT(stats_.own.reads.Value(), 0);

  // A report is read from one master (its freshest entry's). Unreadable on all but the last
  // master (the presence only refreshes its ttl, believing it written), it is read from that
  // one.
  for (int i = 0; i < 4; ++i) cluster_.Set(i, HoldersKey(a.id), "not a report", 600'000);
  const FleetView after = ViewWhere([&](const FleetView& w) {
    const FleetLock* l = LockIn(w, "job");
    return l && l->detail && AgentIn(w, a.id) && AgentIn(w, a.id)->locks_total == 1;
  });
  const FleetLock* again = LockIn(after, "job");
  ASSERT_TRUE(again && again->detail);
  EXPECT_EQ(again->detail->holder.cmdline, "worker");
}

TEST_F(FleetRoomTest, StopRemovesTheEntryAtOnce) {
  const AgentRecord a = Record("alpha");
  auto pa = Presence(cluster_, a);
  ASSERT_TRUE(Eventually([&] { return cluster_.CountWithKey(AgentKey(a.id)) == 5; }, kDeadline));
  pa->Stop();
  EXPECT_EQ(cluster_.CountWithKey(AgentKey(a.id)), 0);
  EXPECT_EQ(cluster_.CountWithKey(HoldersKey(a.id)), 0);
  EXPECT_FALSE(AgentIn(FreshView(), a.id));
}

TEST_F(FleetRoomTest, AnEntryNotRefreshedLeavesTheViewWhenItsTtlRunsOut) {
  // A killed agent: its entry, written once, is never refreshed nor deleted.
  AgentRecord dead = Record("dead");
  dead.heartbeat_unix_ms = UnixMsNow();
  dead.heartbeat_ttl_ms = 2'000;
  for (int i = 0; i < cluster_.size(); ++i) {
    cluster_.Set(i, AgentKey(dead.id), Encode(dead), 2'000);
  }
  // The index member outlives the entry, as a killed agent's does.
  for (int i = 0; i < cluster_.size(); ++i) {
    redisContext* c = redisConnect("127.0.0.1", cluster_.port(i));
    ASSERT_TRUE(c && !c->err);
    freeReplyObject(redisCommand(c, "ZADD %s %lld %s", AgentsIndexKey().c_str(),
                                 static_cast<long long>(UnixMsNow() + 2'000), dead.id.c_str()));
    redisFree(c);
  }
  const FleetView seen = ViewWhere([&](const FleetView& v) { return AgentIn(v, dead.id); });
  ASSERT_TRUE(AgentIn(seen, dead.id)) << "the entry was never read within its 2 s ttl";
  const FleetView gone = ViewWhere([&](const FleetView& v) { return !AgentIn(v, dead.id); });
  EXPECT_FALSE(AgentIn(gone, dead.id));
}

TEST_F(FleetRoomTest, ALockOnThreeOfFiveMastersShowsItsMastersQuorumAndHolder) {
  const AgentRecord a = Record("alpha");
  auto pa = Presence(cluster_, a);
  const std::string gone_id = NewAgentId();
  for (int i : {0, 2, 4}) cluster_.Set(i, "lock:live", LockValue(a.id, "t1"), 20'000);
  for (int i : {1, 2, 3}) cluster_.Set(i, "lock:orphan", LockValue(gone_id, "t2"), 20'000);
  const FleetView v = ViewWhere([&](const FleetView& w) { return AgentIn(w, a.id) != nullptr; });
  const FleetLock* live = LockIn(v, "live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->masters, (std::vector<int>{0, 2, 4}));
  EXPECT_TRUE(live->quorum);
  EXPECT_EQ(live->state, HolderState::kLive);
  EXPECT_EQ(live->agent_name, "alpha");
  EXPECT_GT(live->validity_ms, 0);
  EXPECT_LE(live->validity_ms, 20'000);
  const FleetLock* orphan = LockIn(v, "orphan");
  ASSERT_TRUE(orphan);
  EXPECT_EQ(orphan->masters, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(orphan->state, HolderState::kGone);
  EXPECT_EQ(orphan->agent_id, gone_id);
  EXPECT_EQ(v.masters_read, 5);
  EXPECT_TRUE(v.complete);
}

TEST_F(FleetRoomTest, RevokeOfAGoneHoldersLockComparesDeletesAndAnnouncesTheRelease) {
  const std::string gone_id = NewAgentId();
  const std::string value = LockValue(gone_id, "t");
  for (int i : {0, 1, 2}) cluster_.Set(i, "lock:stale", value, 60'000);
  cluster_.Set(3, "lock:stale", LockValue(gone_id, "another-grant"), 60'000);

  redisContext* sub = redisConnect("127.0.0.1", cluster_.port(0));
  ASSERT_TRUE(sub && !sub->err);
  timeval tv{5, 0};
  redisSetTimeout(sub, tv);
  const std::string channel = scripts::ReleaseChannel("lock:stale");
  freeReplyObject(redisCommand(sub, "SUBSCRIBE %s", channel.c_str()));  // confirmed

  RevokeRequest req;
  req.masters = Masters(cluster_);
  req.key_prefix = "lock:";
  req.resource = "stale";
  req.by = "test";
  const RevokeResult r = RevokeInFleet(req);
  EXPECT_EQ(r.how, RevokeResult::How::kDeleted) << HowName(r.how) << " " << r.error;
  EXPECT_EQ(r.agent_id, gone_id);
  EXPECT_EQ(r.receivers, 0);
  EXPECT_EQ(r.deleted, 3);
  EXPECT_EQ(r.masters_read, 5);
  EXPECT_EQ(cluster_.CountWithKey("lock:stale"), 1);  // another grant's copy is untouched

  void* raw = nullptr;
  ASSERT_EQ(redisGetReply(sub, &raw), REDIS_OK) << "no release announcement within 5 s";
  auto* msg = static_cast<redisReply*>(raw);
  ASSERT_EQ(msg->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(msg->elements, 3u);
  EXPECT_EQ(std::string(msg->element[0]->str), "message");
  EXPECT_EQ(std::string(msg->element[2]->str), "lock:stale");
  freeReplyObject(msg);
  redisFree(sub);

  EXPECT_EQ(RevokeInFleet(req).how, RevokeResult::How::kNotHeld);
}

// ZADD key score member on master i (through EVAL: the cluster's Run wants a status reply).
void AddReader(RedisCluster& cluster, int i, const std::string& key, const std::string& member) {
  cluster.Run(i, {"EVAL",
                  "local t = redis.call('time') "
                  "redis.call('zadd', KEYS[1], t[1] * 1000 + 60000, ARGV[1]) "
                  "redis.call('pexpire', KEYS[1], 60000) return {ok='OK'}",
                  "1", key, member});
}

TEST_F(FleetRoomTest, AGoneAgentsReaderIsShownAndRevokedWithZremLeavingTheOthers) {
  const std::string gone = LockValue(NewAgentId(), "r1");
  const std::string other = LockValue(NewAgentId(), "r2");
  const std::string set = ReadersKey("lock:", "shared-cfg");
  for (int i : {0, 1, 2, 3}) AddReader(cluster_, i, set, gone);
  for (int i : {0, 1, 2}) AddReader(cluster_, i, set, other);
  cluster_.Set(0, "lock:pool", LockShape{LockKind::kSemaphore, 2}.Marker(), 60'000);
  cluster_.Set(1, "lock:pool", LockShape{LockKind::kSemaphore, 2}.Marker(), 60'000);

  std::shared_ptr<const FleetView> view;
  ASSERT_TRUE(Eventually(
      [&] {
        view = reader_->View(UnixMsNow(), kDeadline);
        return view && view->locks.size() == 2;
      },
      kDeadline));
  for (const FleetLock& l : view->locks) {
    EXPECT_EQ(l.resource, "shared-cfg");  // the markers alone are no rows
    EXPECT_EQ(l.mode, HoldMode::kShared);
    EXPECT_EQ(l.state, HolderState::kGone);
    EXPECT_GT(l.validity_ms, 0);
  }
  const FleetLock* row = view->locks[0].value == gone ? &view->locks[0] : &view->locks[1];
  EXPECT_EQ(row->masters.size(), 4u);

  RevokeRequest req;
  req.masters = Masters(cluster_);
  req.key_prefix = "lock:";
  req.resource = "shared-cfg";
  req.hold = row->hold_id;
  req.by = "test";
  const RevokeResult r = RevokeInFleet(req);
  EXPECT_EQ(r.how, RevokeResult::How::kDeleted) << HowName(r.how) << " " << r.error;
  EXPECT_EQ(r.mode, HoldMode::kShared);
  EXPECT_EQ(r.deleted, 4);
  for (int i = 0; i < cluster_.size(); ++i) {
    const auto members = cluster_.ZRange(i, set);
    EXPECT_EQ(members.size(), i < 3 ? 1u : 0u) << "master " << i;
    for (const auto& [member, score] : members) EXPECT_EQ(member, other);
  }
  EXPECT_EQ(RevokeInFleet(req).how, RevokeResult::How::kNotHeld);
  // Without a hold id the revoke means the exclusive hold, which nobody has.
  req.hold.clear();
  EXPECT_EQ(RevokeInFleet(req).how, RevokeResult::How::kNotHeld);
}

TEST_F(FleetRoomTest, ExactlyOneOfTwoPresencesIsTheReporterAndTheOtherTakesOver) {
  auto pa = Presence(cluster_, Record("alpha"));
  auto pb = Presence(cluster_, Record("beta"));
  ASSERT_TRUE(Eventually([&] { return pa->reporter() != pb->reporter(); }, kDeadline));
  // It stays so over further heartbeats of both.
  const uint64_t a0 = pa->heartbeats(), b0 = pb->heartbeats();
  ASSERT_TRUE(Eventually([&] { return pa->heartbeats() > a0 + 2 && pb->heartbeats() > b0 + 2; },
                         kDeadline));
  EXPECT_NE(pa->reporter(), pb->reporter());
  FleetPresence* reporter = pa->reporter() ? pa.get() : pb.get();
  FleetPresence* other = pa->reporter() ? pb.get() : pa.get();
  reporter->Stop();
  EXPECT_FALSE(reporter->reporter());
  EXPECT_TRUE(Eventually([&] { return other->reporter(); }, kDeadline));
}

}  // namespace
}  // namespace lw::test::fleet_room
