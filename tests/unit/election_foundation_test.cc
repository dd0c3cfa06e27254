// The foundations of elections and detached leases, as pure logic: the leader record's codec,
// the election's keys read back, the rounds an election's hold sends, and the wire fields of
// the election ops and of acquire's detach. The scripts run against real masters in
// tests/integration/election_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "core/election_record.h"
#include "core/lock_kind.h"
#include "locking/claims.h"
#include "protocol/messages.h"
#include "redis/scripts.h"

namespace lw {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ElectionRecordTest, StoredRecordStartsWithTheHoldValueAndReadsBackWithoutIt) {
  const ElectionRecord rec{7, 1'700'000'000'123, R"({"value":"host-a:8080"})"};
  const std::string stored = StoredRecord("agent-1:tok", rec);
  EXPECT_EQ(stored, std::string("agent-1:tok\x1f") + "7\x1f" + "1700000000123\x1f" + rec.payload);
  // The read script strips "<value>" US; what is left parses back.
  const auto read = ParseReadRecord(stored.substr(std::string("agent-1:tok\x1f").size()));
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, rec);
}

TEST(ElectionRecordTest, MalformedRecordsAreRefused) {
  EXPECT_FALSE(ParseReadRecord(""));
  EXPECT_FALSE(ParseReadRecord("7"));
  EXPECT_FALSE(ParseReadRecord("7\x1f"));
  EXPECT_FALSE(ParseReadRecord("0\x1f" "5\x1f{}"));   // terms start at 1
  EXPECT_FALSE(ParseReadRecord("-1\x1f" "5\x1f{}"));
  EXPECT_FALSE(ParseReadRecord("7x\x1f" "5\x1f{}"));
  EXPECT_FALSE(ParseReadRecord("7\x1f" "\x1f{}"));
  // An empty payload is still a record (the agent decides what a payload must say).
  const auto empty = ParseReadRecord("7\x1f" "5\x1f");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->payload, "");
}

TEST(ElectionKeysTest, TheRecordKeyReadsBackAsTheLeaderPart) {
  const auto part = ParseLockKey("lock:", LeaderKey("lock:", "jobs"));
  ASSERT_TRUE(part);
  EXPECT_EQ(part->resource, "jobs");
  EXPECT_EQ(part->part, KeyPart::Part::kLeader);
  EXPECT_EQ(LockShape{LockKind::kElection}.Describe(), "election");
  EXPECT_EQ(NameOf(LockKind::kElection), "election");
}

TEST(ElectionRoundsTest, TheReadAsksEveryMasterForTheRecordBesideTheHold) {
  const RoundRequest req = ReadRecordRound("lock:", "jobs");
  EXPECT_EQ(req.op, RoundOp::kKindRead);
  EXPECT_EQ(req.script, scripts::KindScript::kReadRecord);
  EXPECT_THAT(req.keys, ElementsAre("lock:jobs", LeaderKey("lock:", "jobs")));
  EXPECT_TRUE(req.wait_all);
}

// ---- the wire

const protocol::Limits kWireLimits;
const std::string kTok = "0123456789abcdef0123456789abcdef01234567";

template <typename T>
T Decoded(const std::string& line) {
  auto result = protocol::DecodeRequest(line, kWireLimits);
  if (const auto* e = std::get_if<protocol::DecodeError>(&result)) {
    ADD_FAILURE() << "refused " << line << ": " << e->message;
    return {};
  }
  const auto& op = std::get<protocol::Request>(result).op;
  if (!std::holds_alternative<T>(op)) {
    ADD_FAILURE() << "decoded as another op: " << line;
    return {};
  }
  return std::get<T>(op);
}

std::string Refusal(const std::string& line) {
  auto result = protocol::DecodeRequest(line, kWireLimits);
  const auto* e = std::get_if<protocol::DecodeError>(&result);
  if (e == nullptr) {
    ADD_FAILURE() << "accepted " << line;
    return "";
  }
  EXPECT_EQ(e->code, ErrorCode::kBadRequest);
  return e->message;
}

TEST(ElectionWireTest, CampaignTakesANameAValueAndTheUsualTimes) {
  const auto c = Decoded<protocol::CampaignRequest>(
      R"({"op":"campaign","name":"jobs","value":"host-a:8080","ttl_ms":5000,"wait_ms":100})");
  EXPECT_EQ(c.name, "jobs");
  EXPECT_EQ(c.value, "host-a:8080");
  EXPECT_EQ(c.ttl_ms, 5000);
  EXPECT_EQ(c.wait_ms, 100);
  const auto d = Decoded<protocol::CampaignRequest>(R"({"op":"campaign","name":"jobs","value":"v"})");
  EXPECT_EQ(d.ttl_ms, kWireLimits.default_ttl_ms);
  EXPECT_EQ(d.wait_ms, kWireLimits.max_wait_ms);  // a campaign waits as long as it may
}

TEST(ElectionWireTest, CampaignRefusesWhatItCannotAnnounce) {
  EXPECT_THAT(Refusal(R"({"op":"campaign","name":"jobs"})"), HasSubstr("\"value\""));
  EXPECT_THAT(Refusal(R"({"op":"campaign","name":"jobs","value":""})"), HasSubstr("empty"));
  EXPECT_THAT(Refusal(R"({"op":"campaign","name":"jobs","value":"a\u0001b"})"),
              HasSubstr("control character"));
  EXPECT_THAT(Refusal(R"({"op":"campaign","name":"jobs","value":7})"), HasSubstr("string"));
  EXPECT_THAT(Refusal(R"({"op":"campaign","name":"jobs","value":")" + std::string(1025, 'x') +
                      R"("})"),
              HasSubstr("1025 bytes"));
  EXPECT_THAT(Refusal(R"({"op":"campaign","value":"v"})"), HasSubstr("\"name\""));
  EXPECT_THAT(Refusal(R"({"op":"campaign","resource":"jobs","value":"v"})"),
              HasSubstr("unknown field"));
}

TEST(ElectionWireTest, ResignLeaderObserveUnobserveNameAnElection) {
  const auto r = Decoded<protocol::ResignRequest>(
      R"({"op":"resign","name":"jobs","token":")" + kTok + R"("})");
  EXPECT_EQ(r.name, "jobs");
  EXPECT_EQ(r.token, kTok);
  EXPECT_EQ(Decoded<protocol::LeaderRequest>(R"({"op":"leader","name":"jobs"})").name, "jobs");
  EXPECT_EQ(Decoded<protocol::ObserveRequest>(R"({"op":"observe","name":"jobs"})").name, "jobs");
  EXPECT_EQ(Decoded<protocol::UnobserveRequest>(R"({"op":"unobserve","name":"j"})").name, "j");
  EXPECT_THAT(Refusal(R"({"op":"resign","name":"jobs"})"), HasSubstr("\"token\""));
  EXPECT_THAT(Refusal(R"({"op":"leader"})"), HasSubstr("election's name"));
  EXPECT_THAT(Refusal(R"({"op":"observe","name":""})"), HasSubstr("\"name\""));
}

TEST(DetachWireTest, AcquireDetachIsAFlagThatRefusesRenew) {
  const auto a = Decoded<protocol::AcquireRequest>(
      R"({"op":"acquire","resource":"deploy","detach":true,"ttl_ms":60000})");
  EXPECT_TRUE(a.detach);
  EXPECT_FALSE(Decoded<protocol::AcquireRequest>(R"({"op":"acquire","resource":"r"})").detach);
  EXPECT_THAT(Refusal(R"({"op":"acquire","resource":"r","detach":true,"renew":true})"),
              HasSubstr("\"renew\""));
  EXPECT_THAT(Refusal(R"({"op":"acquire","resource":"r","detach":"yes"})"),
              HasSubstr("true or false"));
}

}  // namespace
}  // namespace lw
