// Every wire that carries a hold, to the byte: the socket's `locks` reply, the admin API's
// locks (/api/v1/state), the holder report on the masters (as this agent writes it, and as older
// agents wrote it), and the fleet table (/api/v1/fleet). The holds are built only through what
// every version of the model shares (LockView's fields, reports read from their JSON text), so
// these expectations pin the wire, not the model behind it.

#include <gtest/gtest.h>

#include "admin/fleet_views.h"
#include "admin/views.h"
#include "fleet/records.h"
#include "fleet/view.h"
#include "protocol/hold_json.h"
#include "protocol/messages.h"

namespace lw {
namespace {

constexpr int64_t kWireNow = 1'700'000'100'000;
const std::string kWireA = "aaaaaaaaaaaaaaaa";
const std::string kWireB = "bbbbbbbbbbbbbbbb";
const std::string kWireGone = "dddddddddddddddd";

// One hold of each kind held through this agent: a fenced mutex, a semaphore's permit, a read
// hold, an election's leader and a detached lease.
std::vector<LockView> WireLocks() {
  LockView mutex;
  mutex.resource = "orders:1";
  mutex.session = 7;
  mutex.holder = {4242, 1000, 100, "worker --job 1"};
  mutex.held_ms = 1500;
  mutex.validity_ms = 28'000;
  mutex.ttl_ms = 30'000;
  mutex.renew = true;
  mutex.waiters = 2;
  mutex.key = "lock:orders:1";
  mutex.fence = 41;
  mutex.hold = 3;

  LockView permit = mutex;
  permit.resource = "pool";
  permit.session = 8;
  permit.fence = std::nullopt;
  permit.kind = LockKind::kSemaphore;
  permit.mode = HoldMode::kPermit;
  permit.permits = 4;
  permit.permit = 2;
  permit.holds = 3;
  permit.waiters = 0;

  LockView read = mutex;
  read.resource = "cfg";
  read.mode = HoldMode::kShared;
  read.holds = 2;
  read.renew = false;

  LockView leader = mutex;
  leader.resource = "jobs";
  leader.kind = LockKind::kElection;
  leader.fence = 9;
  leader.election = ElectionRecord{9, 1'700'000'000'000, R"({"value":"host-a:8080","pid":77})"};

  LockView lease = mutex;
  lease.resource = "lease";
  lease.session = 900;
  lease.detached = true;
  lease.holder.cmdline = "";
  return {mutex, permit, read, leader, lease};
}

TEST(HoldWire, SocketLocksReply) {
  EXPECT_EQ(protocol::EncodeLocks(5, WireLocks()),
      R"w({"id":5,"ok":true,"locks":[{"resource":"orders:1","session":7,"pid":4242,"uid":1000,)w"
      R"w("held_ms":1500,"validity_ms":28000,"renew":true,"waiters":2},{"resource":"pool","ses)w"
      R"w(sion":8,"pid":4242,"uid":1000,"held_ms":1500,"validity_ms":28000,"renew":true,"waite)w"
      R"w(rs":0,"mode":"permit","permits":4,"permit":2},{"resource":"cfg","session":7,"pid":42)w"
      R"w(42,"uid":1000,"held_ms":1500,"validity_ms":28000,"renew":false,"waiters":2,"mode":"s)w"
      R"w(hared"},{"resource":"jobs","session":7,"pid":4242,"uid":1000,"held_ms":1500,"validit)w"
      R"w(y_ms":28000,"renew":true,"waiters":2},{"resource":"lease","session":900,"pid":4242,")w"
      R"w(uid":1000,"held_ms":1500,"validity_ms":28000,"renew":true,"waiters":2,"detached":tru)w"
      R"w(e}]})w"
      "\n");
}

TEST(HoldWire, AdminLocks) {
  Snapshot s;
  s.quorum = 1;
  s.masters.resize(1);
  s.masters[0].addr = "127.0.0.1:1";
  s.locks = WireLocks();
  WaiterView candidate;
  candidate.resource = "jobs";
  candidate.session = 12;
  candidate.waited_ms = 300;
  candidate.peer = {4243, 1000, 100, "worker --elect"};
  s.waiter_list = {candidate};
  StateInputs in;
  in.snapshot = &s;
  in.stuck_after_ms = 60'000;
  EXPECT_EQ(Dump(StateView(in)["locks"]),
      R"w([{"resource":"orders:1","session":7,"pid":4242,"uid":1000,"gid":100,"cmdline":"worke)w"
      R"w(r --job 1","held_ms":1500,"validity_ms":28000,"ttl_ms":30000,"renew":true,"waiters":)w"
      R"w(2,"kind":"mutex","mode":"exclusive","election":null,"permits":null,"permit":null,"ho)w"
      R"w(lders":1,"detached":false,"stuck":false,"stuck_reason":"","presence":["unknown"],"pr)w"
      R"w(esence_checked_at":""},{"resource":"pool","session":8,"pid":4242,"uid":1000,"gid":10)w"
      R"w(0,"cmdline":"worker --job 1","held_ms":1500,"validity_ms":28000,"ttl_ms":30000,"rene)w"
      R"w(w":true,"waiters":0,"kind":"semaphore","mode":"permit","election":null,"permits":4,")w"
      R"w(permit":2,"holders":3,"detached":false,"stuck":false,"stuck_reason":"","presence":[")w"
      R"w(unknown"],"presence_checked_at":""},{"resource":"cfg","session":7,"pid":4242,"uid":1)w"
      R"w(000,"gid":100,"cmdline":"worker --job 1","held_ms":1500,"validity_ms":28000,"ttl_ms")w"
      R"w(:30000,"renew":false,"waiters":2,"kind":"mutex","mode":"shared","election":null,"per)w"
      R"w(mits":null,"permit":null,"holders":2,"detached":false,"stuck":false,"stuck_reason":")w"
      R"w(","presence":["unknown"],"presence_checked_at":""},{"resource":"jobs","session":7,"p)w"
      R"w(id":4242,"uid":1000,"gid":100,"cmdline":"worker --job 1","held_ms":1500,"validity_ms)w"
      R"w(":28000,"ttl_ms":30000,"renew":true,"waiters":2,"kind":"election","mode":"exclusive")w"
      R"w(,"election":{"term":9,"since_unix_ms":1700000000000,"value":"host-a:8080","agent":nu)w"
      R"w(ll,"host":null,"pid":77,"candidates":[{"session":12,"pid":4243,"uid":1000,"cmdline":)w"
      R"w("worker --elect","waited_ms":300}]},"permits":null,"permit":null,"holders":1,"detach)w"
      R"w(ed":false,"stuck":false,"stuck_reason":"","presence":["unknown"],"presence_checked_a)w"
      R"w(t":""},{"resource":"lease","session":900,"pid":4242,"uid":1000,"gid":100,"cmdline":")w"
      R"w(","held_ms":1500,"validity_ms":28000,"ttl_ms":30000,"renew":true,"waiters":2,"kind":)w"
      R"w("mutex","mode":"exclusive","election":null,"permits":null,"permit":null,"holders":1,)w"
      R"w("detached":true,"stuck":false,"stuck_reason":"","presence":["unknown"],"presence_che)w"
      R"w(cked_at":""}])w"
      "\n");
}

// A report as this version writes it: every kind of hold.
constexpr char kWireReport[] =
    R"({"locks":[{"cmdline":"worker --job 1","fence":41,"held_since_unix_ms":1700000097500,"pid)"
    R"(":4242,"renew":true,"resource":"orders:1","ttl_ms":30000,"uid":1000,"waiters":2},{"cmdli)"
    R"(ne":"worker --job 1","fence":null,"held_since_unix_ms":1700000097500,"mode":"permit","pe)"
    R"(rmit":2,"permits":4,"pid":4242,"renew":true,"resource":"pool","ttl_ms":30000,"uid":1000,)"
    R"("waiters":0},{"cmdline":"worker --job 1","fence":41,"held_since_unix_ms":1700000097500,")"
    R"(mode":"shared","pid":4242,"renew":false,"resource":"cfg","ttl_ms":30000,"uid":1000,"wait)"
    R"(ers":2},{"cmdline":"worker --job 1","fence":9,"held_since_unix_ms":1700000097500,"pid":4)"
    R"(242,"renew":true,"resource":"jobs","ttl_ms":30000,"uid":1000,"waiters":2},{"cmdline":"",)"
    R"("detached":true,"fence":41,"held_since_unix_ms":1700000097500,"pid":4242,"renew":true,"r)"
    R"(esource":"lease","ttl_ms":30000,"uid":1000,"waiters":2}],"locks_total":5,"unix_ms":17000)"
    R"(00099000,"waiters":[{"cmdline":"wait","pid":5,"resource":"orders:1","since_unix_ms":1700)"
    R"(000098200,"uid":1000}],"waiters_total":1})";

// A report as agents before hold modes and detached leases wrote it.
constexpr char kWireOldReport[] =
    R"({"locks":[{"cmdline":"old --job","fence":null,"held_since_unix_ms":1700000090000,)"
    R"("pid":31,"renew":true,"resource":"old:1","ttl_ms":30000,"uid":1000,"waiters":0}],)"
    R"("locks_total":1,"unix_ms":1700000099000,"waiters":[],"waiters_total":0})";

TEST(HoldWire, HolderReportAsWritten) {
  const std::optional<fleet::HolderReport> back = fleet::DecodeHolderReport(kWireReport);
  ASSERT_TRUE(back);
  EXPECT_EQ(fleet::Encode(*back) + "\n", std::string(kWireReport) + "\n");
}

TEST(HoldWire, AnOlderAgentsReportReadsAsExclusiveAndAttached) {
  const std::optional<fleet::HolderReport> back = fleet::DecodeHolderReport(kWireOldReport);
  ASSERT_TRUE(back);
  EXPECT_EQ(fleet::Encode(*back), kWireOldReport);
  ASSERT_EQ(back->locks.size(), 1u);
  EXPECT_EQ(back->locks[0].mode, HoldMode::kExclusive);
  EXPECT_FALSE(back->locks[0].detached);
  EXPECT_EQ(back->locks[0].fence, std::nullopt);
}

// Alpha reports every hold above; bravo's report is older than one of its holds; a gone agent
// holds one; something that is no agent holds another.
fleet::FleetView WireFleet() {
  fleet::ViewInputs in;
  in.key_prefix = "lock:";
  in.stuck_after_ms = 300'000;
  in.now_unix_ms = kWireNow;
  for (int i = 0; i < 3; ++i) {
    fleet::MasterRead m;
    m.master = "127.0.0.1:" + std::to_string(7000 + i);
    m.ok = true;
    fleet::AgentRecord a;
    a.id = kWireA;
    a.name = "alpha";
    a.host = "alpha.example";
    a.heartbeat_unix_ms = kWireNow - 500;
    m.agents.push_back(a);
    a.id = kWireB;
    a.name = "bravo";
    a.host = "bravo.example";
    m.agents.push_back(a);
    m.reports.emplace_back(kWireA, *fleet::DecodeHolderReport(kWireReport));
    m.reports.emplace_back(kWireB, *fleet::DecodeHolderReport(kWireOldReport));
    const auto copy = [&m](std::string key, std::string value, int64_t pttl) {
      m.copies.push_back({std::move(key), std::move(value), pttl});
    };
    copy("lock:orders:1", fleet::LockValue(kWireA, "t1"), 28'000);
    copy("lock:pool", "lockwarden:semaphore:4", 30'000);
    copy("lock:pool\x1fpermit:2", fleet::LockValue(kWireA, "t2"), 27'000);
    copy("lock:cfg\x1freaders", fleet::LockValue(kWireA, "t3"), 26'000);
    copy("lock:jobs", fleet::LockValue(kWireA, "t4"), 25'000);
    const std::string record =
        "\x1f" "9\x1f" "1700000000000\x1f" R"({"value":"host-a:8080","pid":77})";
    copy("lock:jobs\x1fleader", fleet::LockValue(kWireA, "t4") + record, 25'000);
    copy("lock:lease", fleet::LockValue(kWireA, "t5"), 24'000);
    copy("lock:old:1", fleet::LockValue(kWireB, "t6"), 23'000);
    copy("lock:unreported", fleet::LockValue(kWireB, "t7"), 22'000);
    copy("lock:orphan", fleet::LockValue(kWireGone, "t8"), 21'000);
    copy("lock:foreign", "a-bare-token", -1);
    in.masters.push_back(std::move(m));
  }
  return fleet::BuildView(std::move(in));
}

TEST(HoldWire, FleetTable) {
  fleet::AgentRecord self;
  self.id = kWireA;
  self.name = "alpha";
  const nlohmann::ordered_json locks = FleetJson(WireFleet(), self, {})["locks"];
  EXPECT_EQ(Dump(locks),
      R"w([{"resource":"foreign","hold_id":"3fb16c7707282f37","mode":"exclusive","permit":)w"
      R"w(null,"permits":null,"holder":{"state":"unknown","agent_id":"","agent_name":"","h)w"
      R"w(ost":"","pid":-1,"uid":-1,"cmdline":"","held_ms":-1,"held_since_ms":0,"ttl_ms":0)w"
      R"w(,"renew":false,"fence":null,"waiters":0,"detached":false},"masters":["127.0.0.1:)w"
      R"w(7000","127.0.0.1:7001","127.0.0.1:7002"],"masters_total":3,"quorum":true,"validi)w"
      R"w(ty_ms":-1,"stuck":true,"stuck_reason":"never expires (no ttl)","waiters":[],"sha)w"
      R"w(pe":{"kind":"mutex","permits":null,"permits_held":0,"readers":0,"writer":true,"w)w"
      R"w(riter_waiting":false},"election":null,"blocked_by":[],"waiting_behind":[]},{"res)w"
      R"w(ource":"old:1","hold_id":"183a7fca1c1f6497","mode":"exclusive","permit":null,"pe)w"
      R"w(rmits":null,"holder":{"state":"live","agent_id":"bbbbbbbbbbbbbbbb","agent_name":)w"
      R"w("bravo","host":"bravo.example","pid":31,"uid":1000,"cmdline":"old --job","held_m)w"
      R"w(s":10000,"held_since_ms":1700000090000,"ttl_ms":30000,"renew":true,"fence":null,)w"
      R"w("waiters":0,"detached":false},"masters":["127.0.0.1:7000","127.0.0.1:7001","127.)w"
      R"w(0.0.1:7002"],"masters_total":3,"quorum":true,"validity_ms":23000,"stuck":false,")w"
      R"w(stuck_reason":"","waiters":[],"shape":{"kind":"mutex","permits":null,"permits_he)w"
      R"w(ld":0,"readers":0,"writer":true,"writer_waiting":false},"election":null,"blocked)w"
      R"w(_by":[],"waiting_behind":[]},{"resource":"cfg","hold_id":"405412192a8bfc28","mod)w"
      R"w(e":"shared","permit":null,"permits":null,"holder":{"state":"live","agent_id":"aa)w"
      R"w(aaaaaaaaaaaaaa","agent_name":"alpha","host":"alpha.example","pid":4242,"uid":100)w"
      R"w(0,"cmdline":"worker --job 1","held_ms":2500,"held_since_ms":1700000097500,"ttl_m)w"
      R"w(s":30000,"renew":false,"fence":41,"waiters":2,"detached":false},"masters":["127.)w"
      R"w(0.0.1:7000","127.0.0.1:7001","127.0.0.1:7002"],"masters_total":3,"quorum":true,")w"
      R"w(validity_ms":26000,"stuck":false,"stuck_reason":"","waiters":[],"shape":{"kind":)w"
      R"w("mutex","permits":null,"permits_held":0,"readers":1,"writer":false,"writer_waiti)w"
      R"w(ng":false},"election":null,"blocked_by":[],"waiting_behind":[]},{"resource":"job)w"
      R"w(s","hold_id":"405419192a8c080d","mode":"exclusive","permit":null,"permits":null,)w"
      R"w("holder":{"state":"live","agent_id":"aaaaaaaaaaaaaaaa","agent_name":"alpha","hos)w"
      R"w(t":"alpha.example","pid":4242,"uid":1000,"cmdline":"worker --job 1","held_ms":25)w"
      R"w(00,"held_since_ms":1700000097500,"ttl_ms":30000,"renew":true,"fence":9,"waiters")w"
      R"w(:2,"detached":false},"masters":["127.0.0.1:7000","127.0.0.1:7001","127.0.0.1:700)w"
      R"w(2"],"masters_total":3,"quorum":true,"validity_ms":25000,"stuck":false,"stuck_rea)w"
      R"w(son":"","waiters":[],"shape":{"kind":"election","permits":null,"permits_held":0,)w"
      R"w("readers":0,"writer":true,"writer_waiting":false},"election":{"term":9,"since_un)w"
      R"w(ix_ms":1700000000000,"value":"host-a:8080","agent":null,"host":null,"pid":77},"b)w"
      R"w(locked_by":[],"waiting_behind":[]},{"resource":"lease","hold_id":"405418192a8c06)w"
      R"w(5a","mode":"exclusive","permit":null,"permits":null,"holder":{"state":"live","ag)w"
      R"w(ent_id":"aaaaaaaaaaaaaaaa","agent_name":"alpha","host":"alpha.example","pid":424)w"
      R"w(2,"uid":1000,"cmdline":"","held_ms":2500,"held_since_ms":1700000097500,"ttl_ms":)w"
      R"w(30000,"renew":true,"fence":41,"waiters":2,"detached":true},"masters":["127.0.0.1)w"
      R"w(:7000","127.0.0.1:7001","127.0.0.1:7002"],"masters_total":3,"quorum":true,"valid)w"
      R"w(ity_ms":24000,"stuck":false,"stuck_reason":"","waiters":[],"shape":{"kind":"mute)w"
      R"w(x","permits":null,"permits_held":0,"readers":0,"writer":true,"writer_waiting":fa)w"
      R"w(lse},"election":null,"blocked_by":[],"waiting_behind":[]},{"resource":"orders:1")w"
      R"w(,"hold_id":"405414192a8bff8e","mode":"exclusive","permit":null,"permits":null,"h)w"
      R"w(older":{"state":"live","agent_id":"aaaaaaaaaaaaaaaa","agent_name":"alpha","host")w"
      R"w(:"alpha.example","pid":4242,"uid":1000,"cmdline":"worker --job 1","held_ms":2500)w"
      R"w(,"held_since_ms":1700000097500,"ttl_ms":30000,"renew":true,"fence":41,"waiters":)w"
      R"w(2,"detached":false},"masters":["127.0.0.1:7000","127.0.0.1:7001","127.0.0.1:7002)w"
      R"w("],"masters_total":3,"quorum":true,"validity_ms":28000,"stuck":false,"stuck_reas)w"
      R"w(on":"","waiters":[{"resource":"orders:1","agent_id":"aaaaaaaaaaaaaaaa","agent_na)w"
      R"w(me":"alpha","pid":5,"uid":1000,"cmdline":"wait","since_ms":1700000098200,"waited)w"
      R"w(_ms":1800,"mode":"exclusive","permits":null}],"shape":{"kind":"mutex","permits":)w"
      R"w(null,"permits_held":0,"readers":0,"writer":true,"writer_waiting":false},"electio)w"
      R"w(n":null,"blocked_by":[],"waiting_behind":[{"agent_id":"aaaaaaaaaaaaaaaa","agent_)w"
      R"w(name":"alpha","host":"alpha.example","gone":false,"pid":5,"actor_pid":5,"cmdline)w"
      R"w(":"wait","waits_for":"orders:1","waited_ms":1800,"depth":0,"cycle":false}]},{"re)w"
      R"w(source":"pool","hold_id":"405413192a8bfddb","mode":"permit","permit":2,"permits")w"
      R"w(:4,"holder":{"state":"live","agent_id":"aaaaaaaaaaaaaaaa","agent_name":"alpha",")w"
      R"w(host":"alpha.example","pid":4242,"uid":1000,"cmdline":"worker --job 1","held_ms")w"
      R"w(:2500,"held_since_ms":1700000097500,"ttl_ms":30000,"renew":true,"fence":null,"wa)w"
      R"w(iters":0,"detached":false},"masters":["127.0.0.1:7000","127.0.0.1:7001","127.0.0)w"
      R"w(.1:7002"],"masters_total":3,"quorum":true,"validity_ms":27000,"stuck":false,"stu)w"
      R"w(ck_reason":"","waiters":[],"shape":{"kind":"semaphore","permits":4,"permits_held)w"
      R"w(":1,"readers":0,"writer":false,"writer_waiting":false},"election":null,"blocked_)w"
      R"w(by":[],"waiting_behind":[]},{"resource":"orphan","hold_id":"060c9b33296b1419","m)w"
      R"w(ode":"exclusive","permit":null,"permits":null,"holder":{"state":"gone","agent_id)w"
      R"w(":"dddddddddddddddd","agent_name":"","host":"","pid":-1,"uid":-1,"cmdline":"","h)w"
      R"w(eld_ms":-1,"held_since_ms":0,"ttl_ms":0,"renew":false,"fence":null,"waiters":0,")w"
      R"w(detached":false},"masters":["127.0.0.1:7000","127.0.0.1:7001","127.0.0.1:7002"],)w"
      R"w("masters_total":3,"quorum":true,"validity_ms":21000,"stuck":false,"stuck_reason")w"
      R"w(:"","waiters":[],"shape":{"kind":"mutex","permits":null,"permits_held":0,"reader)w"
      R"w(s":0,"writer":true,"writer_waiting":false},"election":null,"blocked_by":[],"wait)w"
      R"w(ing_behind":[]},{"resource":"unreported","hold_id":"183a7eca1c1f62e4","mode":"ex)w"
      R"w(clusive","permit":null,"permits":null,"holder":{"state":"live","agent_id":"bbbbb)w"
      R"w(bbbbbbbbbbb","agent_name":"bravo","host":"bravo.example","pid":-1,"uid":-1,"cmdl)w"
      R"w(ine":"","held_ms":-1,"held_since_ms":0,"ttl_ms":0,"renew":false,"fence":null,"wa)w"
      R"w(iters":0,"detached":false},"masters":["127.0.0.1:7000","127.0.0.1:7001","127.0.0)w"
      R"w(.1:7002"],"masters_total":3,"quorum":true,"validity_ms":22000,"stuck":false,"stu)w"
      R"w(ck_reason":"","waiters":[],"shape":{"kind":"mutex","permits":null,"permits_held")w"
      R"w(:0,"readers":0,"writer":true,"writer_waiting":false},"election":null,"blocked_by)w"
      R"w(":[],"waiting_behind":[]}])w" "\n");
}

// A holder agent whose clock runs ahead of the reader's: held for 0 at the read, held since
// as its agent said.
TEST(HoldWire, AFleetHolderAheadOfTheReadersClockIsHeldForZeroSinceItsOwnTime) {
  Hold ahead;
  ahead.resource = "r";
  ahead.held_since_unix_ms = kWireNow + 700;
  const nlohmann::ordered_json j = protocol::HoldJson(ahead, protocol::HoldWire::kFleet, kWireNow);
  EXPECT_EQ(j["held_ms"], 0);
  EXPECT_EQ(j["held_since_ms"], kWireNow + 700);
  EXPECT_EQ(HeldMsAt(ahead, kWireNow + 1'000), 300);
  EXPECT_EQ(HeldMsAt(Hold{}, kWireNow), -1) << "since not known: a row its holder did not report";
}

}  // namespace
}  // namespace lw
