// The admin HTTP server against hostile or careless clients, on a real agent: reads need the
// token once the listener is reachable beyond this host; a body over admin_max_body_bytes is
// 413; slow clients (slowloris) are cut at their deadline while others are served; connections
// over admin_max_connections get 503 at once; the agent stays healthy and stops promptly.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "admin/bounded_http_server.h"
#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::admin_hardening {
namespace {

using nlohmann::json;

const std::string kToken = "admin-hardening-token-0123456789";

HttpHeaders Bearer(const std::string& token = kToken) {
  return {{"Authorization", "Bearer " + token}};
}

// A metric from a scrape that carries the token (-1 when missing or refused).
double MetricWithToken(int port, const std::string& name, const Labels& labels = {}) {
  HttpResult r = HttpGet(port, "/metrics", Bearer());
  if (r.status != 200) return -1;
  return Sample(r.body, name, labels).value_or(-1);
}

// A TCP connection no HTTP library would make: it sends what the test says, when it says.
class RawClient {
 public:
  explicit RawClient(int port, const std::string& host = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const std::string why = std::strerror(errno);
      if (fd_ >= 0) close(fd_);
      throw std::runtime_error("connect " + host + ":" + std::to_string(port) + ": " + why);
    }
    connected_at_ = SteadyClock::now();
  }
  ~RawClient() { close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // False once the server has closed (or reset) the connection.
  bool Send(std::string_view bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

  // Whether the server has closed the connection or sent something, without waiting.
  bool Readable() const {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }

  // Reads until what arrived contains `marker` (true), the connection closes or `deadline`.
  bool ReadUntil(std::string_view marker, milliseconds deadline) {
    const auto until = SteadyClock::now() + deadline;
    while (received_.find(marker) == std::string::npos) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - SteadyClock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return false;
      received_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  struct Ending {
    bool closed = false;          // the server closed or reset the connection
    std::string received;         // what it sent before
    double after_connect_ms = 0;  // when it closed, from our connect
  };
  // Reads until the server closes the connection (a read returns 0, or a reset), or `deadline`.
  Ending AwaitClose(milliseconds deadline) {
    Ending end;
    const auto until = SteadyClock::now() + deadline;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - SteadyClock::now());
      if (left.count() <= 0) return end;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        end.received.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      end.closed = true;  // 0: FIN; -1: ECONNRESET
      end.after_connect_ms =
          std::chrono::duration<double, std::milli>(SteadyClock::now() - connected_at_).count();
      return end;
    }
  }

 private:
  int fd_ = -1;
  SteadyClock::time_point connected_at_;
  std::string received_;  // by ReadUntil
};

// Slowloris: each client gets a request line at once, then one more header byte every 200 ms,
// never finishing its headers. httplib's per-read timeout alone never fires on these.
class Drip {
 public:
  explicit Drip(std::vector<RawClient*> clients) : clients_(std::move(clients)) {
    for (RawClient* c : clients_) c->Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Drip: ");
    thread_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, milliseconds(200), [this] { return stop_; })) {
        for (RawClient* c : clients_) c->Send("a");
        ++rounds_;
      }
    });
  }
  ~Drip() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  int rounds() {
    std::lock_guard lock(mu_);
    return rounds_;
  }

 private:
  std::vector<RawClient*> clients_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int rounds_ = 0;
  std::thread thread_;
};

std::vector<RawClient*> Pointers(const std::vector<std::unique_ptr<RawClient>>& clients) {
  std::vector<RawClient*> out;
  for (const auto& c : clients) out.push_back(c.get());
  return out;
}

// An IPv4 address of this host other than loopback, "" if it has none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (!std::string(text).starts_with("127.")) found = text;
  }
  freeifaddrs(list);
  return found;
}

// The status code of a one-shot GET sent over a raw connection to host:port.
int RawGetStatus(const std::string& host, int port, const std::string& path,
                 const std::string& extra_headers = "") {
  RawClient c(port, host);
  c.Send("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra_headers +
         "Connection: close\r\n\r\n");
  const std::string answer = c.AwaitClose(milliseconds(15'000)).received;
  return answer.starts_with("HTTP/1.1 ") ? std::stoi(answer.substr(9, 3)) : 0;
}

// ----------------------------------------------------------------------------- who may read

class BeyondLoopbackTest : public ::testing::Test {
 protected:
  ~BeyondLoopbackTest() override { std::filesystem::remove_all(dir_); }

  std::string dir_ = MakeTempDir("lw-admin-hard-");
  std::string token_path_ = WriteFile(dir_ + "/token", kToken);
  RedisCluster cluster_{1};
  int port_ = 0;
  // Reachable from every interface: reads need the token, whichever address a client uses.
  std::unique_ptr<AgentProcess> agent_ =
      AgentOnFreePort(cluster_, "0.0.0.0", {"--admin-token-file", token_path_}, &port_);
};

TEST_F(BeyondLoopbackTest, ReadsNeedTheTokenEvenOverLoopbackButProbesAndThePageDoNot) {
  // This client comes over 127.0.0.1, yet the listener is 0.0.0.0: the configured address
  // decides, not the peer's.
  for (const char* path : {"/metrics", "/api/v1/state", "/api/v1/leaks", "/no-such-thing"}) {
    HttpResult none = HttpGet(port_, path);
    EXPECT_EQ(none.status, 401) << path << ": " << none.body;
    ASSERT_NO_THROW({
      const json body = json::parse(none.body);
      EXPECT_EQ(body["ok"], false);
      EXPECT_EQ(body["error"], "unauthorized");
      EXPECT_NE(body["message"].get<std::string>().find("admin token"), std::string::npos);
    }) << none.body;
    EXPECT_EQ(none.Header("WWW-Authenticate"), "Bearer realm=\"lockwarden\"");
    EXPECT_EQ(none.body.find("lockwarden_"), std::string::npos) << "a refusal leaked state";
    EXPECT_EQ(HttpGet(port_, path, Bearer("wrong-token-wrong-token")).status, 401) << path;
  }
  HttpResult metrics = HttpGet(port_, "/metrics", Bearer());
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("lockwarden_admin_refusals_total"), std::string::npos);
  EXPECT_EQ(HttpGet(port_, "/api/v1/state", Bearer()).status, 200);
  EXPECT_EQ(HttpGet(port_, "/api/v1/leaks", Bearer()).status, 200);

  // Probes say only up or down; the page's files hold no state.
  EXPECT_EQ(HttpGet(port_, "/healthz").status, 200);
  EXPECT_TRUE(
      Eventually([&] { return HttpGet(port_, "/readyz").status == 200; }, milliseconds(10'000)));
  HttpResult page = HttpGet(port_, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<title>lockwarden</title>"), std::string::npos);
  EXPECT_EQ(HttpGet(port_, "/app.js").status, 200);

  // Actions keep their own gate (and audit line).
  HttpResult action = HttpPost(port_, "/api/v1/scan", "{}");
  EXPECT_EQ(action.status, 401) << action.body;
  EXPECT_EQ(HttpPost(port_, "/api/v1/scan", "{}", Bearer()).status, 202);
  EXPECT_NE(agent_->Log().find("audit: rescan refused"), std::string::npos);

  // 4 paths x (none + wrong) + the action without a token.
  EXPECT_EQ(MetricWithToken(port_, "lockwarden_admin_refusals_total", {{"reason", "unauthorized"}}),
            9);
}

TEST_F(BeyondLoopbackTest, ThisHostsOwnAddressNeedsTheTokenToo) {
  const std::string host = NonLoopbackAddress();
  if (host.empty()) GTEST_SKIP() << "this host has no IPv4 address besides loopback";
  EXPECT_EQ(RawGetStatus(host, port_, "/metrics"), 401);
  EXPECT_EQ(RawGetStatus(host, port_, "/metrics", "Authorization: Bearer " + kToken + "\r\n"), 200);
  EXPECT_EQ(RawGetStatus(host, port_, "/healthz"), 200);
}

// The scrape config docs/security.md shows: a real Prometheus with `credentials_file` scrapes
// the agent; the same job without it is refused.
TEST_F(BeyondLoopbackTest, PrometheusScrapesWithACredentialsFile) {
  const std::string credentials = dir_ + "/prometheus.token";
  std::ofstream(credentials) << kToken << "\n";
  const std::string target = "127.0.0.1:" + std::to_string(port_);
  std::ofstream(dir_ + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
      << "scrape_configs:\n"
      << "  - job_name: with_token\n"
      << "    authorization:\n      type: Bearer\n      credentials_file: " << credentials << "\n"
      << "    static_configs:\n      - targets: [\"" << target << "\"]\n"
      << "  - job_name: without_token\n"
      << "    static_configs:\n      - targets: [\"" << target << "\"]\n";
  // On a port that was free a moment ago: if another process took it first, Prometheus exits
  // and is started again on a fresh one.
  pid_t prometheus = -1;
  int prom_port = 0;
  for (int attempt = 1; attempt <= 5 && prometheus < 0; ++attempt) {
    prom_port = PickFreePort();
    prometheus = SpawnTestProcess({"prometheus", "--config.file=" + dir_ + "/prometheus.yml",
                                   "--storage.tsdb.path=" + dir_ + "/data",
                                   "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                                  dir_ + "/prometheus.log");
    int code = -1;
    Eventually(
        [&] {
          code = WaitChild(prometheus, milliseconds(0));
          return code >= 0 || HttpGet(prom_port, "/-/ready").status == 200;
        },
        milliseconds(30'000));
    if (code >= 0) prometheus = -1;  // exited (reaped): its port was taken
  }
  ASSERT_GT(prometheus, 0) << FileTail(dir_ + "/prometheus.log");
  json health;  // job -> {health, lastError}
  const bool scraped = Eventually(
      [&] {
        HttpResult r = HttpGet(prom_port, "/api/v1/targets");
        if (r.status != 200) return false;
        const json targets = json::parse(r.body);
        health = json::object();
        for (const auto& t : targets["data"]["activeTargets"]) {
          health[t["labels"]["job"].get<std::string>()] = {{"health", t["health"]},
                                                           {"error", t["lastError"]}};
        }
        return health.value("with_token", json::object()).value("health", "") == "up" &&
               health.value("without_token", json::object()).value("health", "") == "down";
      },
      milliseconds(20'000));
  kill(prometheus, SIGTERM);
  if (WaitChild(prometheus, milliseconds(15'000)) < 0) {
    kill(prometheus, SIGKILL);
    WaitChild(prometheus, milliseconds(15'000));
  }
  ASSERT_TRUE(scraped) << health.dump() << "\n" << FileTail(dir_ + "/prometheus.log");
  EXPECT_NE(health["without_token"]["error"].get<std::string>().find("401"), std::string::npos)
      << health.dump();
}

TEST(LoopbackReadsTest, StayOpenWithoutAToken) {
  RedisCluster cluster(1);
  AgentProcess agent(cluster);  // 127.0.0.1:<port>
  EXPECT_EQ(HttpGet(agent.admin_port(), "/metrics").status, 200);
  EXPECT_EQ(HttpGet(agent.admin_port(), "/api/v1/state").status, 200);
  EXPECT_EQ(HttpGet(agent.admin_port(), "/api/v1/leaks").status, 200);
  EXPECT_EQ(MetricNow(agent.admin_port(), "lockwarden_admin_refusals_total",
                      {{"reason", "unauthorized"}}),
            0);
}

// ----------------------------------------------------------------------------------- bounds

TEST(AdminBoundsTest, BodiesOverTheLimitAreRefusedUnread) {
  const std::string dir = MakeTempDir("lw-admin-body-");
  RedisCluster cluster(1);
  // A 30 s request deadline: whatever is refused below is refused for its size, long before
  // the deadline could have ended the connection.
  constexpr int kTimeoutMs = 30'000;
  AgentProcess agent(cluster, {"--admin-token-file", WriteFile(dir + "/token", kToken),
                               "--admin-max-body-bytes", "2048", "--admin-timeout-ms",
                               std::to_string(kTimeoutMs)});
  const int port = agent.admin_port();
  const std::string big = json{{"resource", std::string(3000, 'x')}}.dump();
  HttpResult too_big = HttpPost(port, "/api/v1/locks/release", big, Bearer());
  EXPECT_EQ(too_big.status, 413) << too_big.body;
  EXPECT_EQ(json::parse(too_big.body)["error"], "bad_request") << too_big.body;
  EXPECT_NE(too_big.body.find("2 KiB"), std::string::npos) << too_big.body;
  EXPECT_EQ(too_big.Header("Connection"), "close");
  // Under the limit, the body is read and judged on its content.
  const std::string fits = json{{"resource", "r"}, {"pad", std::string(1500, 'x')}}.dump();
  EXPECT_EQ(HttpPost(port, "/api/v1/locks/release", fits, Bearer()).status, 400);

  // Judged on the headers: a body announced too large is refused without waiting for it...
  RawClient announced(port);
  announced.Send(
      "POST /api/v1/locks/release HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n");
  RawClient::Ending end = announced.AwaitClose(milliseconds(kTimeoutMs * 2 / 3));
  EXPECT_TRUE(end.received.starts_with("HTTP/1.1 413 ")) << end.received;
  EXPECT_TRUE(end.closed);
  EXPECT_LT(end.after_connect_ms, kTimeoutMs / 2) << "it waited for the body or the deadline";
  // ... and a chunked one, whose size nobody knows up front, too.
  RawClient chunked(port);
  chunked.Send(
      "POST /api/v1/locks/release HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "400\r\n");
  end = chunked.AwaitClose(milliseconds(kTimeoutMs * 2 / 3));
  EXPECT_TRUE(end.received.starts_with("HTTP/1.1 411 ")) << end.received;
  EXPECT_LT(end.after_connect_ms, kTimeoutMs / 2) << "it waited for the body or the deadline";

  // A head that never ends (one endless header line) is cut once past 64 KiB + the body limit,
  // long before the deadline.
  RawClient endless(port);
  endless.Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Endless: ");
  const std::string chunk(16 * 1024, 'a');
  for (int i = 0; i < 64 && endless.Send(chunk); ++i) {
  }
  end = endless.AwaitClose(milliseconds(kTimeoutMs * 2 / 3));
  EXPECT_TRUE(end.closed) << "still open after 1 MiB of header";
  EXPECT_LT(end.after_connect_ms, kTimeoutMs / 2) << "cut by the deadline, not for its size";
  EXPECT_EQ(end.received, "");

  EXPECT_EQ(MetricNow(port, "lockwarden_admin_refusals_total", {{"reason", "too_large"}}), 4);
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  std::filesystem::remove_all(dir);
}

TEST(AdminBoundsTest, SlowClientsAreCutAtTheirDeadlineWhileOthersAreServed) {
  RedisCluster cluster(1);
  // A 10 s deadline: long enough that everything below happens well before it, whatever the
  // load; the slow clients' cut is then the deadline's doing alone.
  constexpr int kTimeoutMs = 10'000;
  AgentProcess agent(cluster, {"--admin-timeout-ms", std::to_string(kTimeoutMs),
                               "--admin-max-connections", "8"});
  const int port = agent.admin_port();

  // 7 of the 8 connections, each dripping a header byte every 200 ms.
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 7; ++i) slow.push_back(std::make_unique<RawClient>(port));
  Drip drip(Pointers(slow));

  // Meanwhile a scrape is served, long before the slow ones' deadline would free a worker, and
  // the slow ones are still connected.
  const auto start = SteadyClock::now();
  HttpResult scrape = HttpGet(port, "/metrics");
  EXPECT_EQ(scrape.status, 200) << scrape.error;
  EXPECT_LT(MsSince(start), kTimeoutMs / 2) << "the scrape waited for a slow client's deadline";
  for (const auto& c : slow) EXPECT_FALSE(c->Readable()) << "cut before its deadline";

  // Each is closed by the server at its deadline after it connected, with no answer, although
  // it kept sending (a per-read timeout would never fire on a drip every 200 ms).
  for (const auto& c : slow) {
    const RawClient::Ending end = c->AwaitClose(milliseconds(3 * kTimeoutMs));
    ASSERT_TRUE(end.closed) << "a slow client still holds its connection long after its deadline";
    EXPECT_GE(end.after_connect_ms, kTimeoutMs - 50);
    EXPECT_LT(end.after_connect_ms, 2 * kTimeoutMs);
    EXPECT_EQ(end.received, "");
  }
  EXPECT_GE(drip.rounds(), 4);  // it kept dripping until the cut

  EXPECT_EQ(MetricNow(port, "lockwarden_admin_refusals_total", {{"reason", "timeout"}}), 7);
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  EXPECT_EQ(kill(agent.pid(), 0), 0);
}

TEST(AdminBoundsTest, OverTheBoundA503AtOnceOrThePlaceOfTheLongestWaitingClient) {
  RedisCluster cluster(1);
  // A connection that has awaited its request for a quarter of the timeout, capped at 1 s (the
  // eviction age, fixed by the server), may be ended to make room for a new one; the 40 s
  // deadline would end it much later.
  constexpr int kTimeoutMs = 40'000;
  constexpr double kEvictAfterMs = 1000;
  const std::vector<std::string> args = {"--admin-timeout-ms", std::to_string(kTimeoutMs),
                                         "--admin-max-connections", "4"};

  // Part 1: while the 4 admitted connections are younger than the eviction age, any other is
  // answered 503 at once. Whether they still are is up to the box: an attempt that took longer
  // than the eviction age is inconclusive (the server may rightly have evicted instead) and is
  // done again from scratch, on a fresh agent.
  UntilConclusive(5, [&] {
    AgentProcess agent(cluster, args);
    const int port = agent.admin_port();
    const auto before_slow = SteadyClock::now();  // the 4 are accepted after this
    std::vector<std::unique_ptr<RawClient>> slow;
    for (int i = 0; i < 4; ++i) slow.push_back(std::make_unique<RawClient>(port));
    Drip drip(Pointers(slow));
    std::vector<RawClient::Ending> extras;
    for (int i = 0; i < 3; ++i) {
      RawClient extra(port);
      // A 503 comes at once; one that does not come in 2 s makes the attempt too slow anyway.
      extras.push_back(extra.AwaitClose(milliseconds(2000)));
    }
    const HttpResult shed = HttpGet(port, "/metrics");
    // Every decision above was taken before this: the 4 were at most this old then.
    if (MsSince(before_slow) >= kEvictAfterMs) return false;
    for (const RawClient::Ending& end : extras) {
      EXPECT_TRUE(end.closed) << "not answered at once";
      EXPECT_TRUE(end.received.starts_with("HTTP/1.1 503 ")) << end.received;
      EXPECT_NE(end.received.find("Retry-After: 1\r\n"), std::string::npos) << end.received;
      EXPECT_NE(end.received.find("Connection: close\r\n"), std::string::npos) << end.received;
    }
    EXPECT_EQ(shed.status, 503) << shed.error;
    if (shed.status == 503) {
      EXPECT_EQ(json::parse(shed.body)["error"], "too_many") << shed.body;
    }
    for (const auto& c : slow) EXPECT_FALSE(c->Readable()) << "an admitted client was cut";
    return true;
  });

  // Part 2: once they have dripped for the eviction age, a scrape takes the place of the one
  // that has waited longest, long before any deadline (retrying after each 503, as
  // Retry-After asks).
  AgentProcess agent(cluster, args);
  const int port = agent.admin_port();
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 4; ++i) slow.push_back(std::make_unique<RawClient>(port));
  Drip drip(Pointers(slow));
  HttpResult scrape;
  ASSERT_TRUE(Eventually(
      [&] {
        scrape = HttpGet(port, "/metrics");
        if (scrape.status == 503) std::this_thread::sleep_for(milliseconds(50));
        return scrape.status != 503;
      },
      milliseconds(kTimeoutMs / 2)))
      << "still 503 long after the slow clients passed the eviction age";
  ASSERT_EQ(scrape.status, 200) << scrape.status << " " << scrape.error;
  const RawClient::Ending oldest = slow[0]->AwaitClose(milliseconds(kTimeoutMs / 4));
  EXPECT_TRUE(oldest.closed) << "the longest-waiting client is still connected";
  EXPECT_EQ(oldest.received, "");
  EXPECT_GE(oldest.after_connect_ms, kEvictAfterMs - 50) << "evicted while still young";
  EXPECT_LT(oldest.after_connect_ms, kTimeoutMs / 2) << "ended by its deadline, not evicted";
  for (size_t i = 1; i < slow.size(); ++i) EXPECT_FALSE(slow[i]->Readable()) << i;

  EXPECT_GE(
      Sample(scrape.body, "lockwarden_admin_refusals_total", {{"reason", "too_many_connections"}})
          .value_or(-1),
      1);
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  EXPECT_EQ(kill(agent.pid(), 0), 0);
}

TEST(AdminBoundsTest, IdleKeepAliveConnectionsMakeRoomForWaitingOnes) {
  RedisCluster cluster(1);
  // Every worker (32) holds an idle keep-alive connection, which it keeps for up to 2 s (fixed
  // by the server) when nobody needs the worker: the next connection is served as soon as one
  // of them gives way. Conclusive when it was served before the first idle connection's 2 s
  // could have run out; an attempt that took longer proves nothing and is done again.
  constexpr double kKeepAliveMs = 2000;
  UntilConclusive(5, [&] {
    // More connections admitted than there are workers.
    AgentProcess agent(cluster, {"--admin-max-connections", "40"});
    const int port = agent.admin_port();
    std::vector<std::unique_ptr<RawClient>> idle;
    const auto first_request = SteadyClock::now();  // no keep-alive began before this
    for (size_t i = 0; i < kMaxHttpWorkers; ++i) {
      idle.push_back(std::make_unique<RawClient>(port));
      idle.back()->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      if (!idle.back()->ReadUntil("ok\n", milliseconds(2000))) return false;
    }
    const HttpResult r = HttpGet(port, "/healthz");
    if (MsSince(first_request) >= kKeepAliveMs) return false;
    EXPECT_EQ(r.status, 200) << r.error;
    int closed = 0;
    for (const auto& c : idle) closed += c->Readable() ? 1 : 0;
    EXPECT_GE(closed, 1) << "served without any idle connection giving way";
    return true;
  });
}

TEST(AdminBoundsTest, StopsPromptlyWhileSlowClientsHoldConnections) {
  RedisCluster cluster(1);
  // A long deadline: only the stop signal can end these connections well before it.
  constexpr int kTimeoutMs = 60'000;
  AgentProcess agent(cluster, {"--admin-timeout-ms", std::to_string(kTimeoutMs)});
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 5; ++i) slow.push_back(std::make_unique<RawClient>(agent.admin_port()));
  Drip drip(Pointers(slow));
  // Served after them (accepted in order): every slow one is on a worker by now.
  ASSERT_EQ(HttpGet(agent.admin_port(), "/healthz").status, 200);

  const auto start = SteadyClock::now();
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.WaitExit(milliseconds(kTimeoutMs / 2)), 0) << agent.Log();
  EXPECT_LT(MsSince(start), kTimeoutMs / 2) << "the stop waited for the slow clients' deadline";
  for (const auto& c : slow) EXPECT_TRUE(c->AwaitClose(milliseconds(10'000)).closed);
}

}  // namespace
}  // namespace lw::test::admin_hardening
