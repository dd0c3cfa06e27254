// The admin listen address and master URLs: hosts are read by C APIs (inet_pton, bind,
// hiredis) as C strings, so a host with a NUL must be refused, not cut short.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config.h"

namespace lw {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::string& text) {
  const auto parsed = ParseListenAddress(text);
  return std::holds_alternative<std::string>(parsed) ? std::get<std::string>(parsed) : "";
}

TEST(ListenAddress, ParsesV4V6LocalhostAndOff) {
  const auto v4 = std::get<std::optional<ListenAddress>>(ParseListenAddress("127.0.0.1:9477"));
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9477);
  const auto v6 = std::get<std::optional<ListenAddress>>(ParseListenAddress("[::1]:0"));
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_FALSE(std::get<std::optional<ListenAddress>>(ParseListenAddress("off")).has_value());
}

// The fuzzer's find (tests/fuzz/corpus/config/regress-listen-nul-host): "0.0.0.0" then a NUL
// and anything was accepted as host "0.0.0.0\0...", which inet_pton saw as 0.0.0.0.
TEST(ListenAddress, RefusesAHostWithANulOrAControlByte) {
  EXPECT_THAT(ErrorOf(std::string("0.0.0.0\0junk:9477", 17)), HasSubstr("control character"));
  EXPECT_THAT(ErrorOf(std::string("[::1\0x]:9477", 12)), HasSubstr("control character"));
  EXPECT_THAT(ErrorOf("127.0.0.1\n:9477"), HasSubstr("control character"));
}

TEST(MasterUrlHost, RefusesABracketedHostWithANul) {
  const auto parsed = ParseMasterUrl(std::string("redis://[::1\0junk]:6379", 24));
  ASSERT_TRUE(std::holds_alternative<std::string>(parsed));
  EXPECT_THAT(std::get<std::string>(parsed), HasSubstr("NUL"));
}

}  // namespace
}  // namespace lw
