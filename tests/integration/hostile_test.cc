// Hostile local clients against a real agent on real masters: malformed and oversized input,
// half lines, thousands of connections, connect/close storms, pipelining without reading, and
// a slowloris on the admin port, while a well-behaved client keeps taking and releasing a
// lock. It must keep being served, the agent must not restart, and its memory stays bounded.
// The latencies of the well-behaved client with and without the attack are printed (and
// written to <test output dir>/hostile.json): figures, not assertions.

#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::hostile {
namespace {

using lw::client::Client;
using lw::client::ClientError;
using nlohmann::json;

int ConnectUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Writes as much as the peer takes until `stop` (a peer that stops reading stalls us).
void WriteUntil(int fd, const std::string& bytes, const std::atomic<bool>& stop) {
  size_t done = 0;
  while (done < bytes.size() && !stop) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n =
        send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

int64_t RssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

struct Latencies {
  std::vector<double> ms;
  int failures = 0;
  double Quantile(double q) const {
    if (ms.empty()) return 0;
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
  }
  json Json() const {
    return {{"cycles", ms.size()}, {"failures", failures}, {"p50_ms", Quantile(0.5)},
            {"p99_ms", Quantile(0.99)}, {"max_ms", ms.empty() ? 0 : Quantile(1.0)}};
  }
};

// The well-behaved client: acquire + release of its own resource, `cycles` times.
Latencies WellBehaved(Client& c, int cycles) {
  Latencies out;
  for (int i = 0; i < cycles; ++i) {
    const auto start = SteadyClock::now();
    try {
      const json grant = c.Acquire("good/work", 5'000, 2'000, false, milliseconds(10'000));
      if (!grant.value("ok", false)) {
        ++out.failures;
        continue;
      }
      if (!c.Release("good/work", grant["token"]).value("ok", false)) ++out.failures;
    } catch (const ClientError&) {
      ++out.failures;
      continue;
    }
    out.ms.push_back(MsSince(start));
  }
  return out;
}

// $LOCKWARDEN_TEST_OUTPUT_DIR (ctest sets it; created if missing), else a fresh temporary
// directory of this run: never a fixed path two runs could share.
std::string OutputDir() {
  const char* dir = std::getenv("LOCKWARDEN_TEST_OUTPUT_DIR");
  if (dir == nullptr || *dir == '\0') return MakeTempDir("lw-hostile-");
  std::filesystem::create_directories(dir);
  return dir;
}

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Thousands of connections need thousands of descriptors here too.
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  RedisCluster cluster_{3};
};

TEST_F(HostileTest, MalformedLinesGetAClearErrorAndTheConnectionLivesOn) {
  AgentProcess agent(cluster_);
  Client c(agent.socket_path());
  const std::vector<std::string> lines = {
      "{not json",
      "[1,2,3]",
      "\"just a string\"",
      "{\"op\":\"acquire\",\"resource\":5}",
      "{\"op\":\"acquire\",\"resource\":\"r\",\"ttl_ms\":\"10\"}",
      "{\"op\":\"acquire\",\"resource\":\"r\",\"ttl_ms\":1e308}",
      "{\"op\":\"acquire\",\"resource\":\"r\",\"ttl_ms\":18446744073709551616}",
      "{\"op\":\"acquire\",\"resource\":\"r\",\"ttl_ms\":-9223372036854775809}",
      "{\"op\":\"acquire\",\"resource\":\"r\",\"ttl_ms\":-5}",
      "{\"op\":\"acquire\",\"resource\":\"r\",\"wait_ms\":-1}",
      "{\"op\":\"acquire\",\"resource\":\"a\\u0000b\"}",
      std::string("{\"op\":\"acquire\",\"resource\":\"a") + '\0' + "b\"}",
      "{\"op\":\"acquire\",\"resource\":\"\xff\xfe\"}",
      "{\"op\":\"acquire\",\"resource\":\"\xc0\xaf\"}",
      "{\"op\":\"acquire\",\"resource\":\"\"}",
      "{\"op\":\"acquire\",\"resource\":\"" + std::string(5'000, 'x') + "\"}",
      "{\"op\":\"acquire\",\"resource\":\"r\",\"surprise\":true}",
      "{\"op\":\"release\",\"resource\":\"r\",\"token\":{}}",
      "{\"op\":\"launch_missiles\"}",
      "{\"op\":null}",
      "{\"id\":{\"deep\":[1,2]},\"op\":\"acquire\"}",
      std::string(30'000, '[') + std::string(30'000, ']'),
      "{\"op\":\"acquire\",\"resource\":\"r\",\"resource\":\"s\"}",
  };
  for (const std::string& line : lines) {
    c.SendRaw(line + "\n");
    const auto reply_line = c.ReadLine(milliseconds(5'000));
    ASSERT_TRUE(reply_line.has_value()) << "no reply to: " << line.substr(0, 80);
    const json reply = json::parse(*reply_line);
    EXPECT_EQ(reply.value("ok", true), false) << line.substr(0, 80) << " -> " << reply;
    EXPECT_EQ(reply.value("error", ""), "bad_request") << line.substr(0, 80) << " -> " << reply;
    EXPECT_FALSE(reply.value("message", "").empty()) << reply;
  }
  EXPECT_TRUE(c.Health().value("ok", false));

  // A 10 MB line: refused once, the rest of it skipped, the connection still usable.
  c.SendRaw(std::string(10 * 1024 * 1024, 'x') + "\n");
  const json too_long = json::parse(c.ReadLine(milliseconds(10'000)).value_or("{}"));
  EXPECT_EQ(too_long.value("error", ""), "bad_request") << too_long;
  EXPECT_NE(too_long.value("message", "").find("limit"), std::string::npos) << too_long;
  EXPECT_TRUE(c.Acquire("after/long", 5'000, 0).value("ok", false));
  EXPECT_EQ(MetricNow(agent.admin_port(), "lockwarden_limit_refusals_total",
                      {{"limit", "line_length"}}),
            1);
}

TEST_F(HostileTest, HalfALineThenCloseLeavesNothingBehind) {
  AgentProcess agent(cluster_);
  for (int i = 0; i < 50; ++i) {
    const int fd = ConnectUnix(agent.socket_path());
    ASSERT_GE(fd, 0);
    const std::string half = "{\"op\":\"acquire\",\"resource\":\"half\",\"ttl";
    ASSERT_EQ(send(fd, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
    close(fd);
  }
  ASSERT_TRUE(Eventually([&] { return MetricNow(agent.admin_port(), "lockwarden_sessions") == 0; },
                         milliseconds(10'000)));
  Client c(agent.socket_path());
  EXPECT_TRUE(c.Acquire("half", 5'000, 0).value("ok", false));  // nobody took it
}

TEST_F(HostileTest, AWellBehavedClientIsServedThroughAnAttack) {
  constexpr int kCycles = 1000;
  constexpr int kConnections = 5'000;
  // A 500 ms node timeout (the default is 50): the masters are not under attack, and on a
  // loaded 2-core box (sanitizers) an agent busy with the attack could otherwise count a master
  // out and fail a well-behaved acquire with no_quorum.
  AgentProcess agent(cluster_, {"--max-connections", "6000", "--admin-timeout-ms", "2000",
                                "--node-timeout-ms", "500", "--min-ttl-ms", "1000"});
  const pid_t pid = agent.pid();
  Client good(agent.socket_path());
  WellBehaved(good, 50);  // warm up
  const int64_t rss_idle = RssKiB(pid);
  const Latencies quiet = WellBehaved(good, kCycles);

  // 5,000 connections, held open for the whole attack.
  std::vector<int> held;
  held.reserve(kConnections);
  for (int i = 0; i < kConnections; ++i) {
    const int fd = ConnectUnix(agent.socket_path());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    held.push_back(fd);
  }
  ASSERT_TRUE(Eventually(
      [&] { return MetricNow(agent.admin_port(), "lockwarden_sessions") >= kConnections; },
      milliseconds(20'000)));
  const int64_t rss_connections = RssKiB(pid);

  std::atomic<bool> stop{false};
  std::atomic<int64_t> storm_connections{0}, garbage_lines{0}, long_lines{0};
  std::vector<std::thread> attackers;
  // Connect/close storm.
  attackers.emplace_back([&] {
    while (!stop) {
      const int fd = ConnectUnix(agent.socket_path());
      if (fd >= 0) close(fd);
      ++storm_connections;
    }
  });
  // 10,000 pipelined requests on one connection that never reads a reply.
  attackers.emplace_back([&] {
    const int fd = ConnectUnix(agent.socket_path());
    std::string batch;
    for (int i = 1; i <= 10'000; ++i) {
      batch += json{{"op", "acquire"}, {"id", i}, {"resource", "flood/" + std::to_string(i % 50)},
                    {"ttl_ms", 1'000}, {"wait_ms", 5'000}}.dump() + "\n";
    }
    WriteUntil(fd, batch, stop);
    while (!stop) std::this_thread::sleep_for(milliseconds(20));  // holds it, never reads
    close(fd);
  });
  // Garbage and 10 MB lines, replies read so the attacker is not merely paused.
  attackers.emplace_back([&] {
    Client g(agent.socket_path());
    const std::string garbage = "{\"op\":\"acquire\",\"resource\":\"\xff\",\"ttl_ms\":-1}\n";
    const std::string huge = std::string(10 * 1024 * 1024, 'z') + "\n";
    while (!stop) {
      try {
        for (int i = 0; i < 100; ++i) g.SendRaw(garbage);
        for (int i = 0; i < 100; ++i) g.ReadLine(milliseconds(5'000));
        garbage_lines += 100;
        g.SendRaw(huge);
        g.ReadLine(milliseconds(5'000));
        ++long_lines;
      } catch (const ClientError&) {
        return;
      }
    }
  });
  // Slowloris on the admin port: connections that send a header byte now and then.
  attackers.emplace_back([&] {
    std::vector<int> slow;
    for (int i = 0; i < 64; ++i) {
      const int fd = ConnectTcp(agent.admin_port());
      if (fd >= 0) slow.push_back(fd);
    }
    while (!stop) {
      for (int fd : slow) send(fd, "X", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(milliseconds(200));
    }
    for (int fd : slow) close(fd);
  });

  const Latencies attacked = WellBehaved(good, kCycles);
  const int64_t rss_attack = RssKiB(pid);
  // The admin port still serves while the attack goes on: the 64 slowloris connections take
  // its 32 places until they have waited long enough to be evicted (or cut at their 2 s
  // deadline), so a scrape may first be answered 503; it is retried.
  std::string metrics;
  Eventually(
      [&] {
        metrics = ScrapeMetrics(agent.admin_port());
        return !metrics.empty();
      },
      milliseconds(15'000));
  stop = true;
  for (auto& t : attackers) t.join();
  for (int fd : held) close(fd);

  EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(agent.pid(), pid);
  EXPECT_EQ(quiet.failures, 0);
  EXPECT_EQ(attacked.failures, 0);
  EXPECT_FALSE(metrics.empty()) << "the admin port did not answer during the attack";
  // Bounded memory: 5,000 sessions and the floods fit in a small multiple of the idle agent.
  EXPECT_LT(rss_attack, 512 * 1024) << "RSS under attack: " << rss_attack << " KiB";
  ASSERT_TRUE(Eventually([&] { return MetricNow(agent.admin_port(), "lockwarden_sessions") <= 1; },
                         milliseconds(20'000)));
  EXPECT_TRUE(good.Health().value("ok", false));
  const int64_t rss_after = RssKiB(pid);

  const json figures = {
      {"quiet", quiet.Json()},
      {"attacked", attacked.Json()},
      {"p99_ratio", quiet.Quantile(0.99) > 0 ? attacked.Quantile(0.99) / quiet.Quantile(0.99) : 0},
      {"rss_kib", {{"idle", rss_idle}, {"with_5000_connections", rss_connections},
                   {"under_attack", rss_attack}, {"after", rss_after}}},
      {"attack", {{"held_connections", kConnections},
                  {"storm_connections", storm_connections.load()},
                  {"garbage_lines", garbage_lines.load()},
                  {"ten_mb_lines", long_lines.load()},
                  {"pipelined_unread_requests", 10'000},
                  {"admin_slowloris_connections", 64}}},
  };
  const std::string out = OutputDir() + "/hostile.json";
  std::printf("hostile figures (%s): %s\n", out.c_str(), figures.dump(2).c_str());
  std::ofstream(out) << figures.dump(2) << "\n";
}

}  // namespace
}  // namespace lw::test::hostile
