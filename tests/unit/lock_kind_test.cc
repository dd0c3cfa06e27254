// Lock kinds: the key layout read back, markers, and the acquire fields of the wire (pure logic; the scripts themselves run against real masters in
// tests/integration/kinds_test.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/election_record.h"
#include "core/lock_kind.h"
#include "protocol/messages.h"

namespace lw {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LockKindTest, KeysReadBackAsTheirPart) {
  const auto base = ParseLockKey("lock:", "lock:db/x");
  ASSERT_TRUE(base);
  EXPECT_EQ(base->resource, "db/x");
  EXPECT_EQ(base->part, KeyPart::Part::kBase);
  const auto permit = ParseLockKey("lock:", PermitKey("lock:", "pool", 17));
  ASSERT_TRUE(permit);
  EXPECT_EQ(permit->resource, "pool");
  EXPECT_EQ(permit->part, KeyPart::Part::kPermit);
  EXPECT_EQ(permit->permit, 17);
  EXPECT_EQ(ParseLockKey("lock:", ReadersKey("lock:", "cfg"))->part, KeyPart::Part::kReaders);
  EXPECT_EQ(ParseLockKey("lock:", WriterWaitingKey("lock:", "cfg"))->part,
            KeyPart::Part::kWriterWaiting);
}

TEST(LockKindTest, ForeignAndMalformedKeysAreRefused) {
  EXPECT_FALSE(ParseLockKey("lock:", "cache:x"));
  EXPECT_FALSE(ParseLockKey("lock:", "lock:"));
  EXPECT_FALSE(ParseLockKey("lock:", "lock:r\x1fpermit:"));
  EXPECT_FALSE(ParseLockKey("lock:", "lock:r\x1fpermit:01"));
  EXPECT_FALSE(ParseLockKey("lock:", "lock:r\x1fpermit:1024"));
  EXPECT_FALSE(ParseLockKey("lock:", "lock:r\x1fpermit:-1"));
  EXPECT_FALSE(ParseLockKey("lock:", "lock:r\x1fsomething"));
  EXPECT_TRUE(ParseLockKey("lock:", "lock:r\x1fpermit:0"));
}

TEST(LockKindTest, AStoredLeaderRecordReadsBackAsTheHoldValueItNamesAndItsRecord) {
  const ElectionRecord record{7, 1'700'000'000'123, R"({"value":"host-a:8080"})"};
  const auto read = ParseStoredRecord(StoredRecord("0123456789abcdef:tok", record));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->value, "0123456789abcdef:tok");
  EXPECT_EQ(read->record, record);
  EXPECT_EQ(ParseLockKey("lock:", LeaderKey("lock:", "jobs"))->part, KeyPart::Part::kLeader);
  for (const char* bad : {"", "no-separator", "\x1f" "7\x1f" "1\x1f" "p", "v\x1f" "0\x1f" "1\x1f" "p",
                          "v\x1f" "x\x1f" "1\x1f" "p", "v\x1f" "7\x1f" "p"}) {
    EXPECT_FALSE(ParseStoredRecord(bad)) << bad;
  }
}

TEST(LockKindTest, MarkersNameTheirSemaphoreAndNothingElse) {
  const LockShape four{LockKind::kSemaphore, 4};
  EXPECT_EQ(four.Marker(), "lockwarden:semaphore:4");
  EXPECT_EQ(ShapeOfMarker(four.Marker()), four);
  EXPECT_EQ(four.Describe(), "semaphore of 4 permits");
  EXPECT_EQ(LockShape{}.Describe(), "lock");
  EXPECT_FALSE(ShapeOfMarker("0123456789abcdef:" + std::string(40, 'a')));
  EXPECT_FALSE(ShapeOfMarker("lockwarden:semaphore:0"));
  EXPECT_FALSE(ShapeOfMarker("lockwarden:semaphore:1025"));
  EXPECT_FALSE(ShapeOfMarker("lockwarden:semaphore:4x"));
}

protocol::AcquireRequest DecodeAcquireLine(const std::string& fields) {
  auto result = protocol::DecodeRequest(
      R"({"op":"acquire","resource":"r")" + fields + "}", protocol::Limits{});
  const auto* request = std::get_if<protocol::Request>(&result);
  EXPECT_NE(request, nullptr) << std::get<protocol::DecodeError>(result).message;
  return request ? std::get<protocol::AcquireRequest>(request->op) : protocol::AcquireRequest{};
}

std::string RefusalOf(const std::string& fields) {
  auto result = protocol::DecodeRequest(
      R"({"op":"acquire","resource":"r")" + fields + "}", protocol::Limits{});
  const auto* error = std::get_if<protocol::DecodeError>(&result);
  return error ? error->message : "accepted";
}

TEST(AcquireKindFieldsTest, PermitsAndSharedAreReadAndBadCombinationsNameTheirField) {
  EXPECT_EQ(DecodeAcquireLine(R"(,"permits":4)").permits, 4);
  EXPECT_TRUE(DecodeAcquireLine(R"(,"shared":true)").shared);
  EXPECT_EQ(DecodeAcquireLine("").permits, 0);
  EXPECT_TRUE(DecodeAcquireLine(R"(,"permits":2,"fence":true)").fence) << "a fence per permit";
  EXPECT_THAT(RefusalOf(R"(,"permits":2,"shared":false)"), HasSubstr("\"shared\""));
  EXPECT_THAT(RefusalOf(R"(,"shared":true,"fence":true)"), HasSubstr("\"fence\""));
  EXPECT_THAT(RefusalOf(R"(,"permits":0)"), HasSubstr("from 1 to 1024"));
  EXPECT_THAT(RefusalOf(R"(,"permits":1025)"), HasSubstr("\"permits\""));
  EXPECT_THAT(RefusalOf(R"(,"permits":2.5)"), HasSubstr("\"permits\""));
  EXPECT_THAT(RefusalOf(R"(,"permits":18446744073709551615)"), HasSubstr("\"permits\""));
  EXPECT_THAT(RefusalOf(R"(,"shared":"yes")"), HasSubstr("\"shared\""));
}

TEST(AcquireKindFieldsTest, GrantsSayTheirModeOnlyWhenNotExclusive) {
  using nlohmann::json;
  const json plain = json::parse(protocol::EncodeAcquired(1, "r", "t", 10, 0));
  EXPECT_FALSE(plain.contains("mode"));
  const json permit = json::parse(
      protocol::EncodeAcquired(1, "r", "t", 10, 0, std::nullopt, HoldMode::kPermit, 3));
  EXPECT_EQ(permit["mode"], "permit");
  EXPECT_EQ(permit["permit"], 3);
  const json shared =
      json::parse(protocol::EncodeAcquired(1, "r", "t", 10, 0, std::nullopt, HoldMode::kShared));
  EXPECT_EQ(shared["mode"], "shared");
  EXPECT_FALSE(shared.contains("permit"));
}

}  // namespace
}  // namespace lw
