// fleet/records: the encoding of what agents write on the masters, and the decoders that treat
// it as untrusted input.

#include "fleet/records.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace lw::fleet {
namespace {

using nlohmann::json;

AgentRecord SampleRecord() {
  AgentRecord r;
  r.id = "0123456789abcdef";
  r.name = "web-1";
  r.host = "web-1.example";
  r.pid = 4242;
  r.version = "0.9.0";
  r.admin_url = "http://127.0.0.1:9100";
  r.started_unix_ms = 1'700'000'000'000;
  r.heartbeat_unix_ms = 1'700'000'005'000;
  r.heartbeat_ttl_ms = 10'000;
  r.settings = {"lock:", 60'000, 0.01, true, "fence:", 4};
  return r;
}

HolderReport SampleReport() {
  HolderReport r;
  r.unix_ms = 1'700'000'005'000;
  r.locks_total = 3;
  r.waiters_total = 1;
  Hold held;
  held.resource = "orders:42";
  held.holder = {100, 1000, -1, "worker --job 42"};
  held.held_since_unix_ms = 1'700'000'000'000;
  held.ttl_ms = 30'000;
  held.renew = true;
  held.fence = 7;
  held.waiters = 1;
  r.locks.push_back(held);
  held.resource = "orders:43";
  held.holder = {101, 1000, -1, ""};
  held.held_since_unix_ms = 1'700'000'001'000;
  held.ttl_ms = 5'000;
  held.renew = false;
  held.fence = std::nullopt;
  held.waiters = 0;
  r.locks.push_back(held);
  r.waiters.push_back({"orders:42", 200, 1001, "other", 1'700'000'004'000});
  return r;
}

// `text` with field `name` (a JSON pointer) replaced by `value`.
std::string With(const std::string& text, const std::string& pointer, const json& value) {
  json j = json::parse(text);
  j[json::json_pointer(pointer)] = value;
  return j.dump();
}
std::string Without(const std::string& text, const std::string& pointer) {
  json j = json::parse(text);
  const json::json_pointer p(pointer);
  j[p.parent_pointer()].erase(p.back());
  return j.dump();
}

TEST(FleetNames, KeysAndChannelsLiveUnderTheNamespace) {
  EXPECT_EQ(AgentsIndexKey(), "lockwarden:agents");
  EXPECT_EQ(AgentKey("0123456789abcdef"), "lockwarden:agent:0123456789abcdef");
  EXPECT_EQ(HoldersKey("0123456789abcdef"), "lockwarden:holders:0123456789abcdef");
  EXPECT_EQ(RevokeChannel("0123456789abcdef"), "lockwarden:revoke:0123456789abcdef");
  EXPECT_EQ(ReporterKey(), "lockwarden:reporter");
}

TEST(FleetNames, LockValueNamesItsAgent) {
  const std::string id = NewAgentId();
  EXPECT_TRUE(IsWellFormedAgentId(id));
  EXPECT_NE(id, NewAgentId());
  EXPECT_EQ(AgentOfValue(LockValue(id, "abc")), id);
  EXPECT_EQ(AgentOfValue("a-bare-token"), std::nullopt);
  EXPECT_EQ(AgentOfValue("0123456789ABCDEF:tok"), std::nullopt);
  EXPECT_EQ(AgentOfValue("0123456789abcde:tok"), std::nullopt);
}

TEST(FleetRecords, AgentRecordRoundTrips) {
  const AgentRecord r = SampleRecord();
  const std::optional<AgentRecord> back = DecodeAgentRecord(Encode(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, r.id);
  EXPECT_EQ(back->name, r.name);
  EXPECT_EQ(back->host, r.host);
  EXPECT_EQ(back->pid, r.pid);
  EXPECT_EQ(back->version, r.version);
  EXPECT_EQ(back->admin_url, r.admin_url);
  EXPECT_EQ(back->started_unix_ms, r.started_unix_ms);
  EXPECT_EQ(back->heartbeat_unix_ms, r.heartbeat_unix_ms);
  EXPECT_EQ(back->heartbeat_ttl_ms, r.heartbeat_ttl_ms);
  EXPECT_EQ(back->settings, r.settings);
}

TEST(FleetRecords, HolderReportRoundTrips) {
  const HolderReport r = SampleReport();
  const std::optional<HolderReport> back = DecodeHolderReport(Encode(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->unix_ms, r.unix_ms);
  EXPECT_EQ(back->locks_total, 3u);
  EXPECT_EQ(back->waiters_total, 1u);
  ASSERT_EQ(back->locks.size(), 2u);
  EXPECT_EQ(back->locks[0].resource, "orders:42");
  EXPECT_EQ(back->locks[0].holder.cmdline, "worker --job 42");
  EXPECT_EQ(back->locks[0].fence, 7);
  EXPECT_TRUE(back->locks[0].renew);
  EXPECT_EQ(back->locks[0].waiters, 1);
  EXPECT_EQ(back->locks[1].fence, std::nullopt);
  EXPECT_EQ(back->locks[1].ttl_ms, 5'000);
  ASSERT_EQ(back->waiters.size(), 1u);
  EXPECT_EQ(back->waiters[0].pid, 200);
  EXPECT_EQ(back->waiters[0].since_unix_ms, 1'700'000'004'000);
}

TEST(FleetRecords, RevokeOrderRoundTrips) {
  const RevokeOrder o{"lock:orders:42", "0123456789abcdef:tok", "ops (10.0.0.9)"};
  const std::optional<RevokeOrder> back = DecodeRevokeOrder(Encode(o));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->key, o.key);
  EXPECT_EQ(back->value, o.value);
  EXPECT_EQ(back->by, o.by);
}

TEST(FleetRecords, EncodeBoundsWhatItWrites) {
  HolderReport r;
  Hold d;
  d.resource = "r";
  d.holder.cmdline = std::string(kMaxCmdlineBytes - 1, 'x') + "\xc3\xa9";  // é straddles the bound
  for (size_t i = 0; i < kMaxPublishedLocks + 5; ++i) r.locks.push_back(d);
  const std::optional<HolderReport> back = DecodeHolderReport(Encode(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->locks.size(), kMaxPublishedLocks);
  EXPECT_EQ(back->locks[0].holder.cmdline, std::string(kMaxCmdlineBytes - 1, 'x'));
}

TEST(FleetRecords, MalformedAgentRecordsAreRefused) {
  const std::string good = Encode(SampleRecord());
  ASSERT_TRUE(DecodeAgentRecord(good));
  EXPECT_FALSE(DecodeAgentRecord("not json"));
  EXPECT_FALSE(DecodeAgentRecord("[1,2]"));
  EXPECT_FALSE(DecodeAgentRecord(""));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/id", "NOT-AN-ID")));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/id", 12)));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/name", std::string(257, 'n'))));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/pid", "4242")));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/pid", -5)));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/pid", int64_t{1} << 40)));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/heartbeat_unix_ms", -1)));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/heartbeat_ttl_ms", 1.5)));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/settings", "lock:")));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/settings/drift_factor", "0.01")));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/settings/drift_factor", 2.0)));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/settings/restart_quarantine", 1)));
  EXPECT_FALSE(DecodeAgentRecord(With(good, "/settings/key_prefix", std::string(1025, 'k'))));
  EXPECT_FALSE(DecodeAgentRecord(Without(good, "/host")));
  EXPECT_FALSE(DecodeAgentRecord(Without(good, "/settings/fence_quorum")));
  EXPECT_FALSE(DecodeAgentRecord(good + std::string(kMaxEntryBytes, ' ')));
}

TEST(FleetRecords, MalformedHolderReportsAreRefused) {
  const std::string good = Encode(SampleReport());
  ASSERT_TRUE(DecodeHolderReport(good));
  EXPECT_FALSE(DecodeHolderReport("{}"));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks", json::object())));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0", "orders:42")));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/resource", std::string(1025, 'r'))));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/cmdline",
                                       std::string(kMaxCmdlineBytes + 1, 'c'))));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/pid", -2)));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/renew", "yes")));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/fence", "7")));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/waiters", -1)));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/waiters/0/since_unix_ms", -1)));
  EXPECT_FALSE(DecodeHolderReport(Without(good, "/waiters/0/uid")));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks_total", -3)));
  json many = json::parse(good);
  many["waiters"] = json::array();
  for (size_t i = 0; i <= kMaxPublishedWaiters; ++i) many["waiters"].push_back(many["locks"][1]);
  EXPECT_FALSE(DecodeHolderReport(many.dump()));
}

TEST(FleetRecords, MalformedRevokeOrdersAreRefused) {
  const std::string good = Encode(RevokeOrder{"lock:a", "0123456789abcdef:t", "ops"});
  ASSERT_TRUE(DecodeRevokeOrder(good));
  EXPECT_FALSE(DecodeRevokeOrder(With(good, "/key", "")));
  EXPECT_FALSE(DecodeRevokeOrder(With(good, "/value", "")));
  EXPECT_FALSE(DecodeRevokeOrder(With(good, "/value", json::array())));
  EXPECT_FALSE(DecodeRevokeOrder(With(good, "/key", std::string(2049, 'k'))));
  EXPECT_FALSE(DecodeRevokeOrder(With(good, "/by", std::string(257, 'b'))));
  EXPECT_FALSE(DecodeRevokeOrder(Without(good, "/by")));
  EXPECT_FALSE(DecodeRevokeOrder("null"));
}

TEST(FleetRecords, PermitsAndReadHoldsCarryTheirModeAndOldReportsStayExclusive) {
  HolderReport r = SampleReport();
  r.locks[0].mode = HoldMode::kPermit;
  r.locks[0].permit = 2;
  r.locks[0].permits = 4;
  r.locks[1].mode = HoldMode::kShared;
  r.waiters[0].mode = HoldMode::kPermit;
  r.waiters[0].permits = 4;
  const std::string text = Encode(r);
  const json j = json::parse(text);
  EXPECT_EQ(j["locks"][0]["mode"], "permit");
  EXPECT_EQ(j["locks"][1]["mode"], "shared");
  EXPECT_FALSE(j["locks"][1].contains("permit"));
  const std::optional<HolderReport> back = DecodeHolderReport(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->locks[0].mode, HoldMode::kPermit);
  EXPECT_EQ(back->locks[0].permit, 2);
  EXPECT_EQ(back->locks[0].permits, 4);
  EXPECT_EQ(back->locks[1].mode, HoldMode::kShared);
  EXPECT_EQ(back->waiters[0].mode, HoldMode::kPermit);
  EXPECT_EQ(back->waiters[0].permits, 4);
  // An exclusive hold writes no mode, as agents before semaphores did; their records read back
  // as exclusive holds.
  const json old = json::parse(Encode(SampleReport()));
  EXPECT_FALSE(old["locks"][0].contains("mode"));
  const std::optional<HolderReport> older = DecodeHolderReport(old.dump());
  ASSERT_TRUE(older);
  EXPECT_EQ(older->locks[0].mode, HoldMode::kExclusive);
  EXPECT_EQ(older->locks[0].permit, -1);
}

TEST(FleetRecords, ModesOutOfBoundsAreRefused) {
  HolderReport r = SampleReport();
  r.locks[0].mode = HoldMode::kPermit;
  r.locks[0].permit = 1;
  r.locks[0].permits = 2;
  const std::string good = Encode(r);
  ASSERT_TRUE(DecodeHolderReport(good));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/mode", "upgrade")));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/permit", 2)));  // not below K
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/permit", -1)));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/locks/0/permits", kMaxPermits + 1)));
  EXPECT_FALSE(DecodeHolderReport(Without(good, "/locks/0/permits")));
  EXPECT_FALSE(DecodeHolderReport(With(good, "/waiters/0/mode", 3)));
}

TEST(FleetRecords, DetachedLeasesSayItAndOthersWriteNothing) {
  HolderReport r = SampleReport();
  r.locks[1].detached = true;
  const std::string text = Encode(r);
  const json j = json::parse(text);
  EXPECT_EQ(j["locks"][1]["detached"], true);
  EXPECT_FALSE(j["locks"][0].contains("detached")) << "as agents before detached leases wrote";
  const std::optional<HolderReport> back = DecodeHolderReport(text);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->locks[0].detached);
  EXPECT_TRUE(back->locks[1].detached);
  EXPECT_TRUE(DecodeHolderReport(With(text, "/locks/1/detached", nullptr)));
  EXPECT_FALSE(DecodeHolderReport(With(text, "/locks/1/detached", 1)));
  EXPECT_FALSE(DecodeHolderReport(With(text, "/locks/1/detached", "true")));
}

TEST(FleetNames, HoldIdsAreShortStableAndDistinct) {
  const std::string id = HoldId("0123456789abcdef:token-1");
  EXPECT_TRUE(IsWellFormedHoldId(id));
  EXPECT_EQ(id, HoldId("0123456789abcdef:token-1"));
  EXPECT_NE(id, HoldId("0123456789abcdef:token-2"));
  EXPECT_EQ(id.find("token"), std::string::npos);
  EXPECT_FALSE(IsWellFormedHoldId("XYZ"));
}

}  // namespace
}  // namespace lw::fleet
