// Unit tests for src/protocol's encoders: every reply and event's exact shape, one line each,
// and replies parsed back to their fields (the decoder's tests are in protocol_test.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace lw::protocol {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kReplyToken = "0123456789abcdef0123456789abcdef01234567";

// ---- encoders -------------------------------------------------------------------------------

TEST(EncodeTest, Ok) {
  EXPECT_EQ(EncodeOk(1), "{\"id\":1,\"ok\":true}\n");
  EXPECT_EQ(EncodeOk(nullptr), "{\"id\":null,\"ok\":true}\n");
  EXPECT_EQ(EncodeOk("req-1"), "{\"id\":\"req-1\",\"ok\":true}\n");
}

TEST(EncodeTest, Acquired) {
  EXPECT_EQ(EncodeAcquired(4, "db", kReplyToken, 29'697, 12),
            "{\"id\":4,\"ok\":true,\"resource\":\"db\",\"token\":\"" + kReplyToken +
                "\",\"validity_ms\":29697,\"waited_ms\":12}\n");
}

TEST(EncodeTest, Extended) {
  EXPECT_EQ(EncodeExtended("x", 9'000), "{\"id\":\"x\",\"ok\":true,\"validity_ms\":9000}\n");
}

TEST(EncodeTest, HeldEmptyAndFull) {
  EXPECT_EQ(EncodeHeld(1, {}), "{\"id\":1,\"ok\":true,\"locks\":[]}\n");
  const std::vector<HeldLock> locks = {{"a", kReplyToken, 100, true}, {"b", kReplyToken, 0, false}};
  EXPECT_EQ(EncodeHeld(2, locks),
            "{\"id\":2,\"ok\":true,\"locks\":["
            "{\"resource\":\"a\",\"token\":\"" +
                kReplyToken +
                "\",\"validity_ms\":100,\"renew\":true},"
                "{\"resource\":\"b\",\"token\":\"" +
                kReplyToken +
                "\",\"validity_ms\":0,\"renew\":false}"
                "]}\n");
}

TEST(EncodeTest, Health) {
  const std::vector<NodeHealthView> nodes = {
      {"10.0.0.1:6379", "off", "", true, 0.25},
      {"10.0.0.2:6379", "verified", "TLS: the master's certificate has expired", false, 0},
      {"10.0.0.3:6379", "unverified", "", true, 0.5, true, 4200, "started 3.0s ago"}};
  EXPECT_EQ(EncodeHealth(1, 2, nodes),
            "{\"id\":1,\"ok\":true,\"quorum\":2,\"nodes\":["
            "{\"addr\":\"10.0.0.1:6379\",\"tls\":\"off\",\"up\":true,\"rtt_ms\":0.25,"
            "\"quarantined\":false},"
            "{\"addr\":\"10.0.0.2:6379\",\"tls\":\"verified\",\"up\":false,\"rtt_ms\":0.0,"
            "\"quarantined\":false,\"error\":\"TLS: the master's certificate has expired\"},"
            "{\"addr\":\"10.0.0.3:6379\",\"tls\":\"unverified\",\"up\":true,\"rtt_ms\":0.5,"
            "\"quarantined\":true,"
            "\"quarantine_left_ms\":4200,\"quarantine_reason\":\"started 3.0s ago\"}]}\n");
  EXPECT_EQ(EncodeHealth(nullptr, 1, {}), "{\"id\":null,\"ok\":true,\"quorum\":1,\"nodes\":[]}\n");
}

TEST(EncodeTest, HealthRttIsRoundedToMicrosecondsAndAlwaysANumber) {
  const auto rtt = [](double value) {
    return json::parse(EncodeHealth(1, 1, {{"n:1", "off", "", true, value}}))["nodes"][0]["rtt_ms"];
  };
  EXPECT_DOUBLE_EQ(rtt(1.23456).get<double>(), 1.235);
  EXPECT_DOUBLE_EQ(rtt(12.0).get<double>(), 12.0);
  EXPECT_TRUE(rtt(std::nan("")).is_number());
  EXPECT_TRUE(rtt(std::numeric_limits<double>::infinity()).is_number());
}

TEST(EncodeTest, ErrorUsesTheCodeName) {
  EXPECT_EQ(EncodeError(3, ErrorCode::kTimeout, "held by another session for all of wait_ms"),
            "{\"id\":3,\"ok\":false,\"error\":\"timeout\",\"message\":\"held by another session "
            "for all of wait_ms\"}\n");
  const std::pair<ErrorCode, std::string> codes[] = {
      {ErrorCode::kBadRequest, "bad_request"},     {ErrorCode::kTimeout, "timeout"},
      {ErrorCode::kNoQuorum, "no_quorum"},         {ErrorCode::kNotHeld, "not_held"},
      {ErrorCode::kTooMany, "too_many"},           {ErrorCode::kForbidden, "forbidden"},
      {ErrorCode::kShuttingDown, "shutting_down"}, {ErrorCode::kInternal, "internal"},
  };
  for (const auto& [code, name] : codes) {
    const json reply = json::parse(EncodeError(nullptr, code, "m"));
    EXPECT_EQ(reply["error"], name);
    EXPECT_EQ(reply["ok"], false);
    EXPECT_TRUE(reply["id"].is_null());
  }
}

TEST(EncodeTest, Lost) {
  EXPECT_EQ(EncodeLost("db", kReplyToken, "renew_failed"),
            "{\"event\":\"lost\",\"resource\":\"db\",\"token\":\"" + kReplyToken +
                "\",\"reason\":\"renew_failed\"}\n");
}

TEST(EncodeTest, EveryLineIsOneLineEvenWithNewlinesInStrings) {
  const std::vector<std::string> lines = {
      EncodeError(1, ErrorCode::kInternal, "two\nlines\r\n"),
      EncodeAcquired(1, "a\nb", kReplyToken, 1, 0),
      EncodeLost("a\nb", kReplyToken, "expired"),
      EncodeHeld(1, {{"a\nb", kReplyToken, 1, false}}),
      EncodeHealth(1, 1, {{"a\nb", "off", "x\ny", false, 1}}),
  };
  for (const auto& line : lines) {
    EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
    EXPECT_EQ(line.find('\r'), std::string::npos) << line;
  }
}

TEST(EncodeTest, Utf8IsWrittenRawAndInvalidBytesAreReplaced) {
  EXPECT_THAT(EncodeLost("ключ🔒", kReplyToken, "expired"), HasSubstr("\"resource\":\"ключ🔒\""));
  std::string line;
  ASSERT_NO_THROW(line = EncodeError(1, ErrorCode::kInternal, "bad \xff byte"));
  EXPECT_EQ(json::parse(line)["message"], "bad \xEF\xBF\xBD byte");
  ASSERT_NO_THROW(line = EncodeAcquired(1, "r\xc3", kReplyToken, 1, 0));
  EXPECT_EQ(json::parse(line)["resource"], "r\xEF\xBF\xBD");
}

// ---- round trips: encode -> parse -----------------------------------------------------------

TEST(EncodeRoundTripTest, RepliesParseBackToTheirFields) {
  const std::string name = "quote\" slash\\ 🔒";
  const json acquired = json::parse(EncodeAcquired("id-1", name, kReplyToken, 5'000, 250));
  EXPECT_EQ(acquired["id"], "id-1");
  EXPECT_EQ(acquired["ok"], true);
  EXPECT_EQ(acquired["resource"], name);
  EXPECT_EQ(acquired["token"], kReplyToken);
  EXPECT_EQ(acquired["validity_ms"], 5'000);
  EXPECT_EQ(acquired["waited_ms"], 250);
  EXPECT_EQ(acquired.size(), 6u);

  const json held = json::parse(EncodeHeld(7, {{name, kReplyToken, 42, true}}));
  ASSERT_EQ(held["locks"].size(), 1u);
  EXPECT_EQ(held["locks"][0]["resource"], name);
  EXPECT_EQ(held["locks"][0]["renew"], true);

  const json lost = json::parse(EncodeLost(name, kReplyToken, "revoked"));
  EXPECT_FALSE(lost.contains("id"));
  EXPECT_EQ(lost["event"], "lost");
  EXPECT_EQ(lost["resource"], name);
  EXPECT_EQ(lost["reason"], "revoked");
}

}  // namespace
}  // namespace lw::protocol
