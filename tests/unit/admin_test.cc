// Admin API pure parts: token comparison, the action gate, JSON views, listen addresses.

#include <gtest/gtest.h>

#include "admin/auth.h"
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

TEST(IsoTime, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(IsoTime(0), "");
  EXPECT_EQ(IsoTime(1'700'000'000'123), "2023-11-14T22:13:20.123Z");
}

TEST(StateView, QuorumStateInWords) {
  Snapshot s;
  s.quorum = 3;
  s.masters.resize(5);
  s.masters_up = 4;
  EXPECT_EQ(StateView(s)["quorum"]["state"], "healthy");
  s.masters_up = 3;
  EXPECT_EQ(StateView(s)["quorum"]["state"], "at_risk");
  s.masters_up = 2;
  EXPECT_EQ(StateView(s)["quorum"]["state"], "lost");
  EXPECT_EQ(StateView(s)["quorum"]["margin"], -1);
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
