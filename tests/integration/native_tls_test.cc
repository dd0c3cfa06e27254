// The agent's own TLS to rediss:// masters (src/redis/tls.*), against real TLS-only
// redis-servers with a CA and certificates made by openssl: server-only TLS, mutual TLS, an ACL
// user, and each way it can go wrong (a wrong CA, a wrong name, an expired certificate, a plain
// master given as rediss://, a TLS master given as redis://, no client certificate), each named
// in the log, the state API and lockwarden_master_connect_failures_total. Keys are read back
// with redis-cli --tls, not with the agent's code. A renewed CA file is used without a restart,
// and `lockwarden scan` (the blocking connections) speaks TLS too.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics_util.h"
#include "state_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"
#include "tls_servers.h"

namespace lw::test::native_tls {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kPassword = "native-tls-pw-41b7";

class NativeTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("lw-ntls-");
    pki_ = std::make_unique<TestPki>(dir_);
    server_ = pki_->Issue("server", "localhost");
  }
  void TearDown() override {
    children_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  int StartMaster(const std::string& name, TlsRedisOptions options) {
    if (options.cert.empty()) {
      options.cert = server_.cert;
      options.key = server_.key;
    }
    if (options.ca.empty()) options.ca = pki_->ca();
    return StartTlsRedis(*children_, dir_, name, options);
  }
  std::vector<int> StartMasters(int n, const TlsRedisOptions& options = {}) {
    std::vector<int> ports;
    for (int i = 0; i < n; ++i) ports.push_back(StartMaster("m" + std::to_string(i), options));
    return ports;
  }
  static std::vector<std::string> Urls(const std::vector<int>& ports,
                                       const std::string& userinfo = "") {
    std::vector<std::string> urls;
    for (int p : ports) urls.push_back("rediss://" + userinfo + "127.0.0.1:" + std::to_string(p));
    return urls;
  }
  std::string PasswordFile() {
    return WriteFile(dir_ + "/redis.pw", kPassword + "\n", 0600);
  }

  // One command through redis-cli over TLS with this test's CA (and client certificate, if
  // given): the agent's code is not the judge of what the masters hold.
  std::string Cli(int port, const std::vector<std::string>& command,
                  const TestPki::Issued* client = nullptr, const std::string& user = "") {
    std::vector<std::string> argv = {"redis-cli", "--tls", "--cacert", pki_->ca(), "-h",
                                     "127.0.0.1", "-p", std::to_string(port)};
    if (client != nullptr) argv.insert(argv.end(), {"--cert", client->cert, "--key", client->key});
    if (!user.empty()) argv.insert(argv.end(), {"--user", user, "--pass", kPassword});
    argv.push_back("--no-auth-warning");
    argv.insert(argv.end(), command.begin(), command.end());
    const std::string out = dir_ + "/cli-" + std::to_string(++cli_calls_) + ".out";
    const pid_t pid = SpawnTestProcess(argv, out);
    EXPECT_EQ(WaitChild(pid, milliseconds(10'000)), 0) << ReadFile(out);
    std::string text = ReadFile(out);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
  }

  // Grants, reads the key back on every master, releases, and sees it gone everywhere.
  void LockRoundTrip(const AgentProcess& agent, const std::vector<int>& ports,
                     const TestPki::Issued* client = nullptr, const std::string& user = "") {
    auto session = agent.Connect();
    const json grant = session.Acquire("tls-job", 30'000, 2'000);
    ASSERT_TRUE(grant.value("ok", false)) << grant << agent.Log();
    const std::string token = grant["token"];
    for (int port : ports) {
      EXPECT_THAT(Cli(port, {"GET", "lock:tls-job"}, client, user), HasSubstr(":" + token));
    }
    EXPECT_TRUE(session.Extend("tls-job", token, 40'000).value("ok", false)) << agent.Log();
    ASSERT_TRUE(session.Release("tls-job", token).value("ok", false)) << agent.Log();
    for (int port : ports) {
      EXPECT_TRUE(Eventually([&] { return Cli(port, {"EXISTS", "lock:tls-job"}, client, user) == "0"; },
                             milliseconds(5'000)));
    }
  }

  // Waits until the master at `index` of the agent's state is down with an error containing
  // `text`, and the failure was counted under one of `reasons`; fails the test otherwise.
  void ExpectDownWith(const AgentProcess& agent, size_t index, const std::string& text,
                      const std::vector<std::string>& reasons, const std::string& master) {
    const json state = StateWhen(
        agent,
        [&](const json& s) {
          return s.contains("masters") && s["masters"].size() > index &&
                 s["masters"][index].value("last_error", "").find(text) != std::string::npos;
        },
        milliseconds(15'000));
    ASSERT_TRUE(state.contains("masters")) << agent.Log();
    EXPECT_FALSE(state["masters"][index].value("up", true));
    EXPECT_THAT(state["masters"][index].value("last_error", ""), HasSubstr(text)) << agent.Log();
    EXPECT_TRUE(Eventually(
        [&] {
          double counted = 0;
          for (const std::string& reason : reasons) {
            counted += std::max(0.0, MetricNow(agent.admin_port(),
                                               "lockwarden_master_connect_failures_total",
                                               {{"master", master}, {"reason", reason}}));
          }
          return counted >= 1;
        },
        milliseconds(5'000)))
        << reasons.front() << "\n" << ScrapeMetrics(agent.admin_port());
    // The log names it once as a warning (the retries after it are debug lines).
    EXPECT_THAT(agent.Log(), HasSubstr("warning master " + master + ": connect attempt failed"));
  }

  std::string dir_;
  std::unique_ptr<TestPki> pki_;
  TestPki::Issued server_;
  std::unique_ptr<Children> children_ = std::make_unique<Children>();
  int cli_calls_ = 0;
};

TEST_F(NativeTlsTest, LocksOverServerOnlyTlsWithTheCertificateChecked) {
  const std::vector<int> ports = StartMasters(3);
  AgentProcess agent(Urls(ports), {"--redis-tls-ca-file", pki_->ca()},
                     AgentProcess::Readiness::kAllMasters);
  LockRoundTrip(agent, ports);
  // The certificate names localhost and 127.0.0.1: checked as an address here, as a DNS name
  // with redis_tls_server_name.
  AgentProcess by_name(Urls(ports),
                       {"--redis-tls-ca-file", pki_->ca(), "--redis-tls-server-name", "localhost"},
                       AgentProcess::Readiness::kAllMasters);
  LockRoundTrip(by_name, ports);
  EXPECT_THAT(agent.Log(), Not(HasSubstr("insecure")));
}

TEST_F(NativeTlsTest, MutualTlsNeedsTheClientCertificate) {
  const TestPki::Issued client = pki_->Issue("client", "lockwarden-agent", 2, /*client=*/true);
  TlsRedisOptions options;
  options.auth_clients = true;
  const std::vector<int> ports = StartMasters(3, options);
  {
    AgentProcess without(Urls(ports), {"--redis-tls-ca-file", pki_->ca()},
                         AgentProcess::Readiness::kSocket);
    const std::string master = "127.0.0.1:" + std::to_string(ports[0]);
    // The master's alert says so, or (when the reset that follows it wins) the agent's hint.
    ExpectDownWith(without, 0, "client certificate", {"tls_client_cert", "closed"}, master);
    EXPECT_EQ(without.Connect().Acquire("never", 30'000, 0).value("error", ""), "no_quorum");
  }
  AgentProcess with(Urls(ports),
                    {"--redis-tls-ca-file", pki_->ca(), "--redis-tls-cert-file", client.cert,
                     "--redis-tls-key-file", client.key},
                    AgentProcess::Readiness::kAllMasters);
  LockRoundTrip(with, ports, &client);
}

TEST_F(NativeTlsTest, AnAclUserLogsInOverTls) {
  TlsRedisOptions options;
  options.extra = {"--user", "default", "off", "--user", "locker", "on", ">" + kPassword, "~*",
                   "&*", "+@all"};
  const std::vector<int> ports = StartMasters(3, options);
  // The user in the URL, the password from the file.
  AgentProcess agent(Urls(ports, "locker@"),
                     {"--redis-tls-ca-file", pki_->ca(), "--redis-password-file", PasswordFile()},
                     AgentProcess::Readiness::kAllMasters);
  LockRoundTrip(agent, ports, nullptr, "locker");
  // The same user as a setting, and a wrong password: refused, and said so.
  const std::string wrong = WriteFile(dir_ + "/wrong.pw", "not-the-password\n", 0600);
  AgentProcess refused(Urls(ports),
                       {"--redis-tls-ca-file", pki_->ca(), "--redis-user", "locker",
                        "--redis-password-file", wrong},
                       AgentProcess::Readiness::kSocket);
  ExpectDownWith(refused, 0, "AUTH failed", {"auth"}, "127.0.0.1:" + std::to_string(ports[0]));
}

TEST_F(NativeTlsTest, EachTlsFailureIsNamedPerMaster) {
  const TestPki::Issued expired = pki_->Issue("expired", "localhost", -1);
  TlsRedisOptions expired_options;
  expired_options.cert = expired.cert;
  expired_options.key = expired.key;
  const int expired_port = StartMaster("expired", expired_options);
  const int tls_port = StartMaster("tls", {});
  RedisCluster plain(1);
  // A port that takes TCP connections (the kernel's backlog) and never answers a byte.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(silent, 64), 0);
  socklen_t len = sizeof addr;
  getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len);
  const int silent_port = ntohs(addr.sin_port);
  const std::vector<std::string> urls = {
      "rediss://127.0.0.1:" + std::to_string(expired_port),
      "rediss://127.0.0.1:" + std::to_string(plain.port(0)),  // a plain master as rediss://
      "redis://127.0.0.1:" + std::to_string(tls_port),        // a TLS master as redis://
      "rediss://127.0.0.1:" + std::to_string(silent_port)};
  AgentProcess agent(urls, {"--redis-tls-ca-file", pki_->ca()}, AgentProcess::Readiness::kSocket);
  auto master = [&](int port) { return "127.0.0.1:" + std::to_string(port); };
  ExpectDownWith(agent, 0, "certificate has expired", {"tls_expired"}, master(expired_port));
  // Redis answers a TLS hello only when its random bytes hold a line break; else it waits for
  // one, and the handshake's deadline says the same.
  ExpectDownWith(agent, 1, "use redis://", {"tls_not_tls", "tls_handshake_timeout"},
                 master(plain.port(0)));
  ExpectDownWith(agent, 2, "use rediss://", {"closed"}, master(tls_port));
  ExpectDownWith(agent, 3, "no TLS handshake within", {"tls_handshake_timeout"},
                 master(silent_port));
  // `lockwarden status` prints each down master's error.
  const std::string out = dir_ + "/status.out";
  const pid_t pid = SpawnTestProcess(
      {LockwardenBinary(), "status", "--socket", agent.socket_path()}, out);
  WaitChild(pid, milliseconds(10'000));
  const std::string status = ReadFile(out);
  EXPECT_THAT(status, HasSubstr("certificate has expired")) << status;
  EXPECT_THAT(status, HasSubstr("use rediss://")) << status;
  EXPECT_THAT(status, HasSubstr("  tls")) << status;
  close(silent);

  // A CA that did not issue the masters' certificate; a name they do not carry.
  TestPki other(dir_, "other-ca");
  AgentProcess untrusted({"rediss://127.0.0.1:" + std::to_string(tls_port)},
                         {"--redis-tls-ca-file", other.ca()}, AgentProcess::Readiness::kSocket);
  ExpectDownWith(untrusted, 0, "not trusted", {"tls_untrusted"}, master(tls_port));
  AgentProcess misnamed({"rediss://127.0.0.1:" + std::to_string(tls_port)},
                        {"--redis-tls-ca-file", pki_->ca(), "--redis-tls-server-name",
                         "redis.example.internal"},
                        AgentProcess::Readiness::kSocket);
  ExpectDownWith(misnamed, 0, "name mismatch", {"tls_name_mismatch"}, master(tls_port));
}

TEST_F(NativeTlsTest, ARenewedCaFileIsUsedWithoutARestart) {
  const std::vector<int> ports = StartMasters(1);
  // The agent trusts another CA at first: the master is down, untrusted.
  TestPki other(dir_, "other-ca");
  const std::string ca_file = dir_ + "/trusted.crt";
  WriteFile(ca_file, ReadFileOrThrow(other.ca()), 0644);
  AgentProcess agent(Urls(ports), {"--redis-tls-ca-file", ca_file},
                     AgentProcess::Readiness::kSocket);
  const std::string master = "127.0.0.1:" + std::to_string(ports[0]);
  ExpectDownWith(agent, 0, "not trusted", {"tls_untrusted"}, master);
  // The file is replaced (as a renewal would, by rename) with the masters' CA.
  WriteFile(ca_file + ".new", ReadFileOrThrow(pki_->ca()), 0644);
  std::filesystem::rename(ca_file + ".new", ca_file);
  ASSERT_TRUE(agent.WaitReady(milliseconds(15'000))) << agent.Log();
  const json state = StateWhen(agent, [](const json& s) {
    return s.contains("masters") && s["masters"][0].value("up", false);
  });
  EXPECT_TRUE(state["masters"][0].value("up", false)) << agent.Log();
}

TEST_F(NativeTlsTest, ScanSpeaksTlsToo) {
  const std::vector<int> ports = StartMasters(3);
  // A key with no ttl: what the scanner reports as a leak, read over TLS.
  ASSERT_EQ(Cli(ports[0], {"SET", "lock:leaked-over-tls", "x"}), "OK");
  std::vector<std::string> argv = {LockwardenBinary(), "scan", "--redis-tls-ca-file", pki_->ca()};
  for (const std::string& url : Urls(ports)) argv.insert(argv.end(), {"--master", url});
  const std::string out = dir_ + "/scan.out";
  const pid_t pid = SpawnTestProcess(argv, out);
  const int code = WaitChild(pid, milliseconds(30'000));
  const std::string text = ReadFile(out);
  EXPECT_THAT(text, HasSubstr("leaked-over-tls")) << text;
  EXPECT_NE(code, 0) << "a leak found is a non-zero exit\n" << text;
  EXPECT_THAT(text, Not(HasSubstr("TLS"))) << text;
}

}  // namespace
}  // namespace lw::test::native_tls
