// fleet/view: BuildView's join of the registry and the lock keys, rule by rule.

#include "fleet/view.h"

#include <gtest/gtest.h>

#include "core/election_record.h"

#include <string>

namespace lw::fleet {
namespace {

constexpr int64_t kNow = 1'700'000'100'000;
constexpr int64_t kStuckAfter = 300'000;
const std::string kA = "aaaaaaaaaaaaaaaa";
const std::string kB = "bbbbbbbbbbbbbbbb";
const std::string kC = "cccccccccccccccc";
const std::string kGoneId = "dddddddddddddddd";

AgentRecord Agent(const std::string& id, const std::string& name, int64_t heartbeat = kNow) {
  AgentRecord r;
  r.id = id;
  r.name = name;
  r.host = name + ".example";
  r.heartbeat_unix_ms = heartbeat;
  r.heartbeat_ttl_ms = 10'000;
  r.settings = {"lock:", 60'000, 0.01, true, "fence:", 0};
  return r;
}

Hold Held(const std::string& resource, int64_t held_for, bool renew = true,
          int64_t ttl = 30'000) {
  Hold d;
  d.resource = resource;
  d.holder.pid = 77;
  d.held_since_unix_ms = kNow - held_for;
  d.ttl_ms = ttl;
  d.renew = renew;
  return d;
}

WaiterDetail Waiter(const std::string& resource, int64_t waited, int pid) {
  return {resource, pid, 1000, "wait", kNow - waited};
}

// n masters, every one answering, with nothing on them.
ViewInputs Inputs(int n) {
  ViewInputs in;
  in.key_prefix = "lock:";
  in.stuck_after_ms = kStuckAfter;
  in.now_unix_ms = kNow;
  for (int i = 0; i < n; ++i) {
    MasterRead m;
    m.master = "127.0.0.1:" + std::to_string(7000 + i);
    m.ok = true;
    in.masters.push_back(m);
  }
  return in;
}

void Register(ViewInputs& in, const AgentRecord& r, std::vector<int> on) {
  for (int m : on) in.masters[m].agents.push_back(r);
}
void Report(ViewInputs& in, const std::string& id, const HolderReport& r, std::vector<int> on) {
  for (int m : on) in.masters[m].reports.emplace_back(id, r);
}
void Copy(ViewInputs& in, const std::string& key, const std::string& value, int64_t pttl,
          std::vector<int> on) {
  for (int m : on) in.masters[m].copies.push_back({key, value, pttl});
}

const FleetLock* Row(const FleetView& v, const std::string& resource) {
  for (const FleetLock& l : v.locks) {
    if (l.resource == resource) return &l;
  }
  return nullptr;
}

TEST(FleetView, AgentsAreUnitedOverMastersAndTheFreshestHeartbeatWins) {
  ViewInputs in = Inputs(3);
  Register(in, Agent(kA, "alpha", kNow - 3'000), {0, 1});
  AgentRecord fresher = Agent(kA, "alpha", kNow - 1'000);
  fresher.pid = 99;
  Register(in, fresher, {2});
  Register(in, Agent(kB, "beta"), {1});
  const FleetView v = BuildView(in);
  ASSERT_EQ(v.agents.size(), 2u);
  EXPECT_EQ(v.agents[0].record.id, kA);
  EXPECT_EQ(v.agents[0].masters, 3);
  EXPECT_EQ(v.agents[0].record.pid, 99);
  EXPECT_EQ(v.agents[0].heartbeat_age_ms, 1'000);
  EXPECT_EQ(v.agents[1].masters, 1);
  EXPECT_EQ(v.quorum, 2);
  EXPECT_TRUE(v.complete);
}

TEST(FleetView, DriftNamesEachFieldThatDiffersFromWhatMostAgentsAnnounce) {
  ViewInputs in = Inputs(1);
  Register(in, Agent(kA, "a"), {0});
  Register(in, Agent(kB, "b"), {0});
  AgentRecord odd = Agent(kC, "c");
  odd.settings.max_ttl_ms = 30'000;
  odd.settings.restart_quarantine = false;
  Register(in, odd, {0});
  const FleetView v = BuildView(in);
  EXPECT_TRUE(v.agents[0].drift.empty());
  EXPECT_TRUE(v.agents[1].drift.empty());
  EXPECT_EQ(v.agents[2].drift,
            (std::vector<std::string>{"max_ttl_ms 30000, the fleet's 60000",
                                      "restart_quarantine false, the fleet's true"}));
}

TEST(FleetView, ADriftTieGoesToTheLowestId) {
  ViewInputs in = Inputs(1);
  AgentRecord b = Agent(kB, "b");
  b.settings.drift_factor = 0.02;
  Register(in, b, {0});
  Register(in, Agent(kA, "a"), {0});
  const FleetView v = BuildView(in);
  EXPECT_TRUE(v.agents[0].drift.empty());  // a, the lowest id
  EXPECT_EQ(v.agents[1].drift,
            (std::vector<std::string>{"drift_factor 0.02, the fleet's 0.01"}));
}

TEST(FleetView, HolderIsLiveGoneOrUnknownAndDetailComesFromItsReport) {
  ViewInputs in = Inputs(3);
  Register(in, Agent(kA, "alpha"), {0, 1, 2});
  HolderReport report;
  report.locks = {Held("mine", 5'000)};
  Report(in, kA, report, {0});
  Copy(in, "lock:mine", LockValue(kA, "t1"), 20'000, {0, 1, 2});
  Copy(in, "lock:orphan", LockValue(kGoneId, "t2"), 20'000, {0, 1});
  Copy(in, "lock:foreign", "a-bare-token", 20'000, {1, 2});
  Copy(in, "other:key", LockValue(kA, "t3"), 20'000, {0, 1, 2});  // outside key_prefix
  const FleetView v = BuildView(in);
  EXPECT_EQ(v.keys, 3u);
  ASSERT_EQ(v.locks.size(), 3u);
  const FleetLock* mine = Row(v, "mine");
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->state, HolderState::kLive);
  EXPECT_EQ(mine->agent_name, "alpha");
  EXPECT_EQ(mine->host, "alpha.example");
  ASSERT_TRUE(mine->detail);
  EXPECT_EQ(mine->detail->holder.pid, 77);
  EXPECT_EQ(mine->held_ms, 5'000);
  const FleetLock* orphan = Row(v, "orphan");
  EXPECT_EQ(orphan->state, HolderState::kGone);
  EXPECT_EQ(orphan->agent_id, kGoneId);
  EXPECT_FALSE(orphan->detail);
  EXPECT_EQ(orphan->held_ms, -1);
  EXPECT_EQ(Row(v, "foreign")->state, HolderState::kUnknown);
  EXPECT_EQ(HolderStateName(HolderState::kGone), "gone");
}

TEST(FleetView, QuorumAndValidityComeFromTheMastersHoldingTheValue) {
  ViewInputs in = Inputs(5);
  Copy(in, "lock:x", LockValue(kA, "t"), 9'000, {0});
  Copy(in, "lock:x", LockValue(kA, "t"), 7'000, {2});
  Copy(in, "lock:x", LockValue(kA, "t"), 8'000, {4});
  Copy(in, "lock:short", LockValue(kA, "u"), 4'000, {1});
  Copy(in, "lock:short", LockValue(kA, "u"), 6'000, {3});
  const FleetView v = BuildView(in);
  const FleetLock* x = Row(v, "x");
  EXPECT_EQ(x->masters, (std::vector<int>{0, 2, 4}));
  EXPECT_TRUE(x->quorum);
  EXPECT_EQ(x->validity_ms, 7'000);  // the 3rd largest of 9000, 8000, 7000
  const FleetLock* s = Row(v, "short");
  EXPECT_FALSE(s->quorum);
  EXPECT_EQ(s->validity_ms, 6'000);  // short of a quorum: the largest
}

TEST(FleetView, MinorityCopiesOfAnotherValueGetTheirOwnRow) {
  ViewInputs in = Inputs(5);
  Register(in, Agent(kA, "alpha"), {0, 1, 2, 3, 4});
  HolderReport report;
  report.waiters = {Waiter("job", 1'000, 5)};
  Report(in, kA, report, {0});
  Copy(in, "lock:job", LockValue(kA, "new"), 20'000, {0, 1, 2});
  Copy(in, "lock:job", LockValue(kA, "old"), 20'000, {3});
  const FleetView v = BuildView(in);
  EXPECT_EQ(v.keys, 1u);
  ASSERT_EQ(v.locks.size(), 2u);
  EXPECT_EQ(v.locks[0].masters.size(), 3u);  // same resource: the most masters first
  EXPECT_TRUE(v.locks[0].quorum);
  EXPECT_EQ(v.locks[1].masters, (std::vector<int>{3}));
  EXPECT_FALSE(v.locks[1].quorum);
  EXPECT_EQ(v.locks[0].waiters.size(), 1u);  // waiters join the quorum row only
  EXPECT_TRUE(v.locks[1].waiters.empty());
}

TEST(FleetView, StuckByTheHolderDetailOrWithoutItByValidity) {
  ViewInputs in = Inputs(1);
  Register(in, Agent(kA, "alpha"), {0});
  HolderReport report;
  report.locks = {Held("long", 400'000), Held("hung", 1'000, false, 600'000),
                  Held("fine", 1'000, true, 600'000)};
  Report(in, kA, report, {0});
  for (const char* r : {"long", "hung", "fine"}) {
    Copy(in, std::string("lock:") + r, LockValue(kA, r), 20'000, {0});
  }
  Copy(in, "lock:gone-long", LockValue(kGoneId, "g"), 400'000, {0});
  Copy(in, "lock:gone-short", LockValue(kGoneId, "h"), 20'000, {0});
  Copy(in, "lock:leak", "v", -1, {0});
  const FleetView v = BuildView(in);
  EXPECT_EQ(Row(v, "long")->stuck_reason, "held 6m40s, over stuck_after 5m00s");
  EXPECT_EQ(Row(v, "hung")->stuck_reason,
            "not renewing, ttl 10m00s: a hung holder keeps it that long");
  EXPECT_EQ(Row(v, "fine")->stuck_reason, "");
  EXPECT_EQ(Row(v, "gone-long")->stuck_reason, "expires in 6m40s, over stuck_after 5m00s");
  EXPECT_EQ(Row(v, "gone-short")->stuck_reason, "");
  EXPECT_EQ(Row(v, "leak")->validity_ms, -1);
  EXPECT_EQ(Row(v, "leak")->stuck_reason, "never expires (no ttl)");
}

TEST(FleetView, StuckReasonIsTheOneRule) {
  EXPECT_EQ(StuckReason(301'000, true, 30'000, kStuckAfter), "held 5m01s, over stuck_after 5m00s");
  EXPECT_EQ(StuckReason(1'000, false, 300'001, kStuckAfter).substr(0, 12), "not renewing");
  EXPECT_EQ(StuckReason(300'000, false, 300'000, kStuckAfter), "");
}

// Two processes on two agents, each holding what the other waits for, and a third that only
// waits: one deadlock of two. A hold younger than the report that lists its waiter is no edge
// (the waiter may have been granted since), so the same pair with such a hold is none.
TEST(FleetView, ADeadlockAcrossAgentsIsFoundAndAHoldYoungerThanTheWaitersReportIsNoEdge) {
  const auto read = [](int64_t r2_held_for) {
    ViewInputs in = Inputs(3);
    Register(in, Agent(kA, "alpha"), {0, 1, 2});
    Register(in, Agent(kB, "beta"), {0, 1, 2});
    Register(in, Agent(kC, "gamma"), {0, 1, 2});
    HolderReport ra, rb, rc;
    ra.unix_ms = rb.unix_ms = rc.unix_ms = kNow - 1'000;
    Hold r1 = Held("r1", 10'000);
    r1.holder.pid = 10;
    Hold r2 = Held("r2", r2_held_for);
    r2.holder.pid = 20;
    ra.locks = {r1};
    ra.waiters = {Waiter("r2", 3'000, 10)};
    rb.locks = {r2};
    rb.waiters = {Waiter("r1", 2'000, 20)};
    rc.waiters = {Waiter("r1", 5'000, 30)};
    Report(in, kA, ra, {0, 1, 2});
    Report(in, kB, rb, {0, 1, 2});
    Report(in, kC, rc, {0, 1, 2});
    Copy(in, "lock:r1", LockValue(kA, "t1"), 20'000, {0, 1, 2});
    Copy(in, "lock:r2", LockValue(kB, "t2"), 20'000, {0, 1, 2});
    return BuildView(in);
  };
  const FleetView v = read(8'000);
  ASSERT_EQ(v.deadlocks.size(), 1u);
  EXPECT_EQ(v.deadlocks[0].actors, (std::vector<Actor>{{kA, 10}, {kB, 20}}))
      << "gamma's 30 waits behind it, and is not in it";
  EXPECT_EQ(v.deadlocks[0].oldest_wait_ms, 3'000);
  EXPECT_TRUE(read(500).deadlocks.empty())
      << "r2's hold began after alpha's report: alpha may hold r2 by now";
}

TEST(FleetView, WaitersOfEveryAgentJoinTheirResourceOldestFirst) {
  ViewInputs in = Inputs(1);
  Register(in, Agent(kA, "alpha"), {0});
  Register(in, Agent(kB, "beta"), {0});
  HolderReport ra, rb, rgone;
  ra.waiters = {Waiter("job", 2'000, 1), Waiter("idle", 500, 3)};
  rb.waiters = {Waiter("job", 9'000, 2), Waiter("idle", 7'000, 4)};
  rgone.waiters = {Waiter("job", 20'000, 9)};  // its agent is not in the registry
  Report(in, kA, ra, {0});
  Report(in, kB, rb, {0});
  Report(in, kGoneId, rgone, {0});
  Copy(in, "lock:job", LockValue(kA, "t"), 20'000, {0});
  const FleetView v = BuildView(in);
  const FleetLock* job = Row(v, "job");
  ASSERT_EQ(job->waiters.size(), 2u);
  EXPECT_EQ(job->waiters[0].agent_name, "beta");
  EXPECT_EQ(job->waiters[0].waited_ms, 9'000);
  EXPECT_EQ(job->waiters[1].detail.pid, 1);
  ASSERT_EQ(v.waiting_unheld.size(), 2u);
  EXPECT_EQ(v.waiting_unheld[0].detail.pid, 4);
  EXPECT_EQ(v.waiting_unheld[1].agent_id, kA);
}

TEST(FleetView, RowsAreStuckFirstThenLongestHeldThenByResource) {
  ViewInputs in = Inputs(1);
  Register(in, Agent(kA, "alpha"), {0});
  HolderReport report;
  report.locks = {Held("b-young", 1'000), Held("c-old", 50'000), Held("d-stuck", 400'000),
                  Held("a-young", 1'000)};
  Report(in, kA, report, {0});
  for (const char* r : {"a-young", "b-young", "c-old", "d-stuck", "e-nodetail"}) {
    Copy(in, std::string("lock:") + r, LockValue(kA, r), 20'000, {0});
  }
  const FleetView v = BuildView(in);
  std::vector<std::string> order;
  for (const FleetLock& l : v.locks) order.push_back(l.resource);
  EXPECT_EQ(order, (std::vector<std::string>{"d-stuck", "c-old", "a-young", "b-young",
                                             "e-nodetail"}));
  EXPECT_EQ(Filter(v, "a-", 10).size(), 1u);
  EXPECT_EQ(Filter(v, "", 2).size(), 2u);
  EXPECT_EQ(Filter(v, "", 2)[0]->resource, "d-stuck");
}

TEST(FleetView, FailedMastersCountNothingAndAViewShortOfQuorumIsIncomplete) {
  ViewInputs in = Inputs(3);
  in.masters[1].ok = false;
  in.masters[2].ok = false;
  Copy(in, "lock:x", LockValue(kA, "t"), 20'000, {0, 1, 2});
  Register(in, Agent(kA, "alpha"), {1});
  const FleetView v = BuildView(in);
  EXPECT_EQ(v.masters_read, 1);
  EXPECT_FALSE(v.complete);
  EXPECT_TRUE(v.agents.empty());
  EXPECT_EQ(v.locks[0].masters, (std::vector<int>{0}));
  EXPECT_TRUE(v.masters[0].copies.empty());  // status only
}

// ---- Semaphores and read-write locks (core/lock_kind.h) ------------------------------------

// A readers set's ZRANGE WITHSCORES reply.
Reply ReadersSetReply(std::vector<std::pair<std::string, int64_t>> members) {
  Reply r;
  r.kind = Reply::Kind::kArray;
  for (const auto& [member, score] : members) {
    Reply m, sc;
    m.kind = sc.kind = Reply::Kind::kString;
    m.text = member;
    sc.text = std::to_string(score);
    r.elements.push_back(m);
    r.elements.push_back(sc);
  }
  return r;
}

std::vector<const FleetLock*> RowsOf(const FleetView& v, const std::string& resource) {
  std::vector<const FleetLock*> out;
  for (const FleetLock& l : v.locks) {
    if (l.resource == resource) out.push_back(&l);
  }
  return out;
}

TEST(FleetView, PermitsAreHoldsOfTheirResourceAndTheMarkerGivesK) {
  ViewInputs in = Inputs(3);
  Register(in, Agent(kA, "alpha"), {0, 1, 2});
  Register(in, Agent(kB, "beta"), {0, 1, 2});
  HolderReport report;
  Hold held = Held("pool", 1'000);
  held.mode = HoldMode::kPermit;
  held.permit = 1;
  held.permits = 4;
  report.locks.push_back(held);
  Report(in, kA, report, {0});
  Copy(in, "lock:pool", LockShape{LockKind::kSemaphore, 4}.Marker(), 30'000, {0, 1, 2});
  Copy(in, PermitKey("lock:", "pool", 1), kA + ":t1", 20'000, {0, 1, 2});
  Copy(in, PermitKey("lock:", "pool", 3), kB + ":t2", 20'000, {0, 1});
  const FleetView v = BuildView(in);
  const auto rows = RowsOf(v, "pool");
  ASSERT_EQ(rows.size(), 2u);  // the marker is no row
  EXPECT_EQ(v.locks.size(), 2u);
  for (const FleetLock* row : rows) {
    EXPECT_EQ(row->mode, HoldMode::kPermit);
    EXPECT_EQ(row->permits, 4);
    EXPECT_EQ(row->resource.find('\x1f'), std::string::npos);
    EXPECT_EQ(row->hold_id, HoldId(row->value));
  }
  const FleetLock* alpha = rows[0]->agent_id == kA ? rows[0] : rows[1];
  EXPECT_EQ(alpha->permit, 1);
  ASSERT_TRUE(alpha->detail);  // the report's detail of permit 1
  EXPECT_EQ(alpha->held_ms, 1'000);
  const FleetResource* pool = ResourceOf(v, "pool");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->kind, LockKind::kSemaphore);
  EXPECT_EQ(pool->permits, 4);
  EXPECT_EQ(pool->permits_held, 2);
  EXPECT_FALSE(pool->writer);
  EXPECT_EQ(v.keys, 3u);
}

TEST(FleetView, AnElectionIsItsLeaderHoldAndTheRecordBesideItNamesTheTerm) {
  ViewInputs in = Inputs(5);
  Register(in, Agent(kA, "alpha"), {0, 1, 2, 3, 4});
  const std::string leader = LockValue(kA, "t7"), old = LockValue(kB, "t6");
  Copy(in, "lock:jobs", leader, 20'000, {0, 1, 2, 3});
  Copy(in, LeaderKey("lock:", "jobs"), StoredRecord(leader, {7, kNow - 5'000, R"({"value":"a"})"}),
       20'000, {0, 1, 2, 3});
  // The old leader's hold and record, left on one master until they expire.
  Copy(in, "lock:jobs", old, 900, {4});
  Copy(in, LeaderKey("lock:", "jobs"), StoredRecord(old, {6, kNow - 9'000, R"({"value":"b"})"}),
       900, {4});
  Copy(in, LeaderKey("lock:", "gone"), StoredRecord(LockValue(kA, "x"), {3, kNow, "{}"}), 500, {0});
  Copy(in, LeaderKey("lock:", "bad"), "not a record", 500, {0});
  const FleetView v = BuildView(in);
  const auto rows = RowsOf(v, "jobs");
  ASSERT_EQ(rows.size(), 2u);  // the records are no rows
  EXPECT_EQ(v.locks.size(), 2u);
  const FleetLock* now = rows[0]->value == leader ? rows[0] : rows[1];
  const FleetLock* before = rows[0]->value == leader ? rows[1] : rows[0];
  EXPECT_EQ(now->mode, HoldMode::kExclusive);
  EXPECT_TRUE(now->quorum);
  ASSERT_TRUE(now->election);
  EXPECT_EQ(now->election->term, 7);
  EXPECT_EQ(now->election->payload, R"({"value":"a"})");
  ASSERT_TRUE(before->election);
  EXPECT_EQ(before->election->term, 6);
  const FleetResource* jobs = ResourceOf(v, "jobs");
  ASSERT_NE(jobs, nullptr);
  EXPECT_EQ(jobs->kind, LockKind::kElection);
  EXPECT_TRUE(jobs->writer);
  EXPECT_EQ(ResourceOf(v, "gone"), nullptr);  // a record without its hold holds nothing
  EXPECT_EQ(v.keys, 4u);
}

TEST(FleetView, ReadersAreOneRowEachAndAWaitingWriterIsShown) {
  ViewInputs in = Inputs(3);
  Register(in, Agent(kA, "alpha"), {0, 1, 2});
  const std::string set = ReadersKey("lock:", "cfg");
  const Reply members =
      ReadersSetReply({{kA + ":r1", kNow + 9'000}, {kB + ":r2", kNow + 4'000},
                       {kC + ":expired", kNow - 1}});
  for (int m : {0, 1, 2}) {
    for (auto& c : ReaderCopies(set, members, 10'000, kNow)) in.masters[m].copies.push_back(c);
  }
  Copy(in, WriterWaitingKey("lock:", "cfg"), kC + ":w", 900, {0});
  const FleetView v = BuildView(in);
  const auto rows = RowsOf(v, "cfg");
  ASSERT_EQ(rows.size(), 2u);  // the expired reader is none
  for (const FleetLock* row : rows) {
    EXPECT_EQ(row->mode, HoldMode::kShared);
    EXPECT_TRUE(row->quorum);
  }
  const FleetLock* a = rows[0]->agent_id == kA ? rows[0] : rows[1];
  const FleetLock* b = rows[0]->agent_id == kA ? rows[1] : rows[0];
  EXPECT_EQ(a->state, HolderState::kLive);
  EXPECT_EQ(a->validity_ms, 9'000);  // the reader's own expiry, not the set's PTTL
  EXPECT_EQ(b->state, HolderState::kGone);
  EXPECT_EQ(b->validity_ms, 4'000);
  const FleetResource* cfg = ResourceOf(v, "cfg");
  ASSERT_NE(cfg, nullptr);
  EXPECT_EQ(cfg->kind, LockKind::kMutex);
  EXPECT_EQ(cfg->readers, 2);
  EXPECT_TRUE(cfg->writer_waiting);
  EXPECT_FALSE(cfg->writer);
}

TEST(FleetView, AReadersSetReplyOfAnotherTypeGivesNoHold) {
  Reply error;
  error.kind = Reply::Kind::kError;
  EXPECT_TRUE(ReaderCopies(ReadersKey("lock:", "cfg"), error, 5'000, kNow).empty());
  const Reply bad = ReadersSetReply({{kA + ":r1", kNow + 9'000}});
  EXPECT_EQ(ReaderCopies("k", bad, 3'000, kNow).at(0).pttl_ms, 3'000);  // at most the set's
}

TEST(FleetView, AKeyOfAnUnknownPartIsCountedButNoRow) {
  ViewInputs in = Inputs(3);
  Copy(in, "lock:x\x1fnew-part", kA + ":t", 5'000, {0, 1, 2});
  Copy(in, "lock:plain", kA + ":t", 5'000, {0, 1, 2});
  const FleetView v = BuildView(in);
  EXPECT_EQ(v.keys, 2u);
  ASSERT_EQ(v.locks.size(), 1u);
  EXPECT_EQ(v.locks[0].mode, HoldMode::kExclusive);
  ASSERT_NE(ResourceOf(v, "plain"), nullptr);
  EXPECT_TRUE(ResourceOf(v, "plain")->writer);
}

}  // namespace
}  // namespace lw::fleet
