// Unit tests for src/redis/info.h: the INFO server fields lockwarden reads.

#include <gtest/gtest.h>

#include <string>

#include "redis/info.h"

namespace lw {
namespace {

// Captured from redis-server 7.0.15 (Debian 12) with redis-cli INFO server; uptime_in_seconds
// edited from 0 so that the test can tell a parsed value from a default.
constexpr const char* kRedis7InfoServer =
    "# Server\r\n"
    "redis_version:7.0.15\r\n"
    "redis_git_sha1:00000000\r\n"
    "redis_git_dirty:0\r\n"
    "redis_build_id:ae4d7c971a948f0\r\n"
    "redis_mode:standalone\r\n"
    "os:Linux 6.18.44-fc-v669 x86_64\r\n"
    "arch_bits:64\r\n"
    "monotonic_clock:POSIX clock_gettime\r\n"
    "multiplexing_api:epoll\r\n"
    "atomicvar_api:c11-builtin\r\n"
    "gcc_version:12.2.0\r\n"
    "process_id:12527\r\n"
    "process_supervised:no\r\n"
    "run_id:5d3e516f1bb45760d897dc25ae4f8aee1b758042\r\n"
    "tcp_port:6399\r\n"
    "server_time_usec:1795218586902732\r\n"
    "uptime_in_seconds:4242\r\n"
    "uptime_in_days:0\r\n"
    "hz:10\r\n"
    "configured_hz:10\r\n"
    "lru_clock:56474\r\n"
    "executable:/tmp/redis-server\r\n"
    "config_file:\r\n"
    "io_threads_active:0\r\n";

TEST(ParseInfoServerTest, ReadsRunIdAndUptimeFromARealRedis7Reply) {
  const ServerInfo info = ParseInfoServer(kRedis7InfoServer);
  EXPECT_EQ(info.run_id, "5d3e516f1bb45760d897dc25ae4f8aee1b758042");
  ASSERT_TRUE(info.uptime_s.has_value());
  EXPECT_EQ(*info.uptime_s, 4242);
}

TEST(ParseInfoServerTest, ToleratesBareNewlinesAndNoFinalNewline) {
  const ServerInfo info =
      ParseInfoServer("# Server\nredis_version:7.0.15\nrun_id:abc123\nuptime_in_seconds:86401");
  EXPECT_EQ(info.run_id, "abc123");
  EXPECT_EQ(info.uptime_s, 86401);
}

TEST(ParseInfoServerTest, MissingFieldsStayEmpty) {
  const ServerInfo info = ParseInfoServer("# Server\r\nredis_version:7.0.15\r\n");
  EXPECT_EQ(info.run_id, "");
  EXPECT_FALSE(info.uptime_s.has_value());
  const ServerInfo empty = ParseInfoServer("");
  EXPECT_EQ(empty.run_id, "");
  EXPECT_FALSE(empty.uptime_s.has_value());
}

TEST(ParseInfoServerTest, IgnoresJunkAndLookalikeKeys) {
  const ServerInfo info = ParseInfoServer(
      "garbage without a colon\r\n"
      "\r\n"
      "#run_id:commented\r\n"
      "master_run_id:not-this-one\r\n"
      "uptime_in_days:3\r\n"
      "run_id:ff00\r\n"
      "uptime_in_seconds:259200\r\n"
      "\x01\x02:\xff\r\n");
  EXPECT_EQ(info.run_id, "ff00");
  EXPECT_EQ(info.uptime_s, 259200);
}

TEST(ParseInfoServerTest, MalformedUptimeIsUnknown) {
  EXPECT_FALSE(ParseInfoServer("uptime_in_seconds:\r\n").uptime_s.has_value());
  EXPECT_FALSE(ParseInfoServer("uptime_in_seconds:12x\r\n").uptime_s.has_value());
  EXPECT_FALSE(ParseInfoServer("uptime_in_seconds:-5\r\n").uptime_s.has_value());
  EXPECT_FALSE(
      ParseInfoServer("uptime_in_seconds:99999999999999999999999\r\n").uptime_s.has_value());
}

TEST(ParseInfoServerTest, TrailingSpaceAndCarriageReturnAreNotPartOfTheValue) {
  const ServerInfo info = ParseInfoServer("run_id:abc \r\nuptime_in_seconds:7\t\r\n");
  EXPECT_EQ(info.run_id, "abc");
  EXPECT_EQ(info.uptime_s, 7);
}

}  // namespace
}  // namespace lw
