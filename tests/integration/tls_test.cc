// The TLS recipe of deploy/stunnel against real processes: a CA and a server certificate made
// with openssl, three TLS-only redis-server masters (--port 0 --tls-port P) that also require a
// password, stunnel4 in client mode running the shipped deploy/stunnel/lockwarden-redis.conf
// with only the site values replaced (ports, master addresses, CA path, the certificate's name),
// and the real agent taking and releasing a lock through the tunnels. Also: a plain-TCP client
// gets nothing from a TLS port, and a tunnel whose checkHost does not match the certificate
// carries no connection.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "support/agent_process.h"
#include "support/files.h"
#include "support/redis_cluster.h"
#include "test_util.h"
#include "tls_servers.h"

#ifndef LOCKWARDEN_SOURCE_DIR
#error "LOCKWARDEN_SOURCE_DIR must name the source tree (set by tests/CMakeLists.txt)"
#endif

namespace lw::test::tls {
namespace {

using nlohmann::json;

constexpr int kMasters = 3;
const std::string kPassword = "tls-test-password-5c1d";
// The name in the server certificate; the shipped config's checkHost is replaced by it.
const std::string kCertName = "localhost";

std::string Trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// One command on a plain connection to 127.0.0.1:port (a tunnel's accept port, or a TLS port to
// show that it does not work), after AUTH. The reply as text; "(no reply: ...)" when there is none,
// "(no connection: ...)" when the connection was refused or reset before it was made.
// The other end dropped the connection, at connect or after it: no master answered.
bool Dropped(const std::string& answer) {
  return answer.rfind("(no reply", 0) == 0 || answer.rfind("(no connection", 0) == 0;
}

std::string Ask(int port, const std::vector<std::string>& command) {
  timeval tv{2, 0};
  redisContext* ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (ctx == nullptr || ctx->err) {
    std::string why = ctx ? ctx->errstr : "out of memory";
    if (ctx) redisFree(ctx);
    return "(no connection: " + why + ")";
  }
  redisSetTimeout(ctx, tv);
  std::string out;
  for (const std::vector<std::string>& c : {std::vector<std::string>{"AUTH", kPassword}, command}) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : c) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r == nullptr) {
      out = "(no reply: " + std::string(ctx->errstr) + ")";
      break;
    }
    if (r->type == REDIS_REPLY_NIL) {
      out = "(nil)";
    } else {
      out = (r->type == REDIS_REPLY_ERROR ? "(error) " : "") +
            (r->str ? std::string(r->str, r->len) : std::to_string(r->integer));
    }
    freeReplyObject(r);
    if (out.rfind("(error)", 0) == 0) break;
  }
  redisFree(ctx);
  return out;
}

struct Tunnel {
  int accept_port = 0;  // plain, on 127.0.0.1: what the agent connects to
  int tls_port = 0;     // the master's TLS port
};

// The shipped config with this test's values. In the k-th [section]: accept, connect, CAfile and
// checkHost replaced (checkHost only when check_host is given); sections beyond the tunnels are
// dropped; setuid/setgid are kept only when this test may switch to that user. Every other line
// (client, verifyChain, sslVersionMin, delay, ...) is the shipped one. Fails the test when a
// section lacks one of the replaced keys.
std::string TunnelConfig(const std::vector<Tunnel>& tunnels, const std::string& ca,
                         const std::optional<std::string>& check_host) {
  const std::string shipped =
      ReadFile(std::string(LOCKWARDEN_SOURCE_DIR) + "/deploy/stunnel/lockwarden-redis.conf");
  const bool may_setuid = geteuid() == 0 && getpwnam("stunnel4") != nullptr;
  std::istringstream lines(shipped);
  std::ostringstream out;
  int section = -1;
  std::map<int, std::set<std::string>> replaced;
  for (std::string line; std::getline(lines, line);) {
    const std::string text = Trim(line);
    if (text.starts_with("[")) ++section;
    if (section >= static_cast<int>(tunnels.size())) continue;
    const size_t eq = text.find('=');
    if (text.starts_with(";") || eq == std::string::npos) {
      out << line << "\n";
      continue;
    }
    const std::string key = Trim(text.substr(0, eq));
    const std::string value = Trim(text.substr(eq + 1));
    if (section < 0) {
      if ((key == "setuid" || key == "setgid") && !may_setuid) continue;
      out << line << "\n";
      continue;
    }
    const Tunnel& t = tunnels[static_cast<size_t>(section)];
    if (key == "accept") {
      EXPECT_TRUE(value.starts_with("127.0.0.1:")) << "the shipped plain side must be loopback";
      out << "accept = 127.0.0.1:" << t.accept_port << "\n";
    } else if (key == "connect") {
      out << "connect = 127.0.0.1:" << t.tls_port << "\n";
    } else if (key == "CAfile") {
      out << "CAfile = " << ca << "\n";
    } else if (key == "checkHost" && check_host) {
      out << "checkHost = " << *check_host << "\n";
    } else {
      out << line << "\n";
    }
    replaced[section].insert(key + (key == "client" || key == "verifyChain" ? "=" + value : ""));
  }
  for (int k = 0; k < static_cast<int>(tunnels.size()); ++k) {
    for (const char* want :
         {"accept", "connect", "CAfile", "checkHost", "client=yes", "verifyChain=yes"}) {
      EXPECT_TRUE(replaced[k].contains(want))
          << "section " << k + 1 << " of the shipped config has no " << want;
    }
  }
  return out.str();
}

class TlsTunnelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("lw-tls-");
    chmod(dir_.c_str(), 0755);  // stunnel may run as stunnel4 and read the CA from here
    MakeCertificates();
    for (int i = 0; i < kMasters; ++i) tunnels_.push_back({0, StartTlsMaster(i)});
  }
  void TearDown() override {
    children_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // A CA, and a server certificate it signed for localhost / 127.0.0.1.
  void MakeCertificates() {
    pki_ = std::make_unique<TestPki>(dir_);
    server_ = pki_->Issue("server", kCertName);
  }

  // A redis-server with TLS only (no plain port) that requires kPassword; returns its TLS port.
  int StartTlsMaster(int i) {
    return StartTlsRedis(*children_, dir_, "redis-" + std::to_string(i),
                         {server_.cert, server_.key, pki_->ca(), false,
                          {"--requirepass", kPassword}});
  }

  // stunnel4 with the shipped config; returns once every tunnel answers PING (or fails the test).
  pid_t StartStunnel(const std::optional<std::string>& check_host, const std::string& name) {
    const std::string conf = dir_ + "/" + name + ".conf";
    const std::string log = dir_ + "/" + name + ".log";
    for (int attempt = 0; attempt < 3; ++attempt) {
      for (Tunnel& t : tunnels_) t.accept_port = PickFreePort();
      std::ofstream(conf) << TunnelConfig(tunnels_, dir_ + "/ca.crt", check_host);
      chmod(conf.c_str(), 0644);
      // stunnel wants an absolute path to its configuration.
      const pid_t pid = children_->Add(SpawnTestProcess({"stunnel4", conf}, log));
      const bool listening = Eventually(
          [&] {
            if (!Children::Alive(pid)) return true;
            for (const Tunnel& t : tunnels_) {
              if (Ask(t.accept_port, {"PING"}).rfind("(no connection", 0) == 0) return false;
            }
            return true;
          },
          milliseconds(5000));
      if (listening && Children::Alive(pid)) {
        stunnel_log_ = log;
        return pid;
      }
      Children::Kill(pid);
      why_ = "stunnel4 " + conf + " did not start:\n" + FileTail(log);
    }
    throw std::runtime_error(why_);
  }

  std::vector<std::string> TunnelUrls() const {
    std::vector<std::string> urls;
    for (const Tunnel& t : tunnels_)
      urls.push_back("redis://127.0.0.1:" + std::to_string(t.accept_port));
    return urls;
  }

  std::string PasswordFile() {
    const std::string path = dir_ + "/redis.pw";
    std::ofstream(path) << kPassword << "\n";
    chmod(path.c_str(), 0600);
    return path;
  }

  std::string dir_;
  std::unique_ptr<TestPki> pki_;
  TestPki::Issued server_;
  std::unique_ptr<Children> children_ = std::make_unique<Children>();
  std::vector<Tunnel> tunnels_;
  std::string stunnel_log_;
  std::string why_;
};

TEST_F(TlsTunnelTest, TheAgentLocksThroughTheShippedStunnelRecipe) {
  StartStunnel(kCertName, "lockwarden-redis");
  for (const Tunnel& t : tunnels_) ASSERT_EQ(Ask(t.accept_port, {"PING"}), "PONG");
  AgentProcess agent(TunnelUrls(), {"--redis-password-file", PasswordFile()},
                     AgentProcess::Readiness::kAllMasters);
  auto client = agent.Connect();
  const json grant = client.Acquire("over-tls", 30'000, 1'000);
  ASSERT_TRUE(grant.value("ok", false)) << grant << agent.Log();
  const std::string token = grant["token"];
  // Every master holds the key, "<agent id>:<token>" (read back through its tunnel: the
  // masters speak only TLS), once each has answered: the grant needs only a quorum's answers.
  for (const Tunnel& t : tunnels_) {
    std::string value;
    EXPECT_TRUE(Eventually(
        [&] {
          value = Ask(t.accept_port, {"GET", "lock:over-tls"});
          return value != "(nil)";
        },
        milliseconds(15'000)));
    EXPECT_THAT(value, ::testing::MatchesRegex("[0-9a-f]{16}:" + token));
  }
  EXPECT_TRUE(client.Extend("over-tls", token, 40'000).value("ok", false));
  EXPECT_TRUE(client.Release("over-tls", token).value("ok", false)) << agent.Log();
  for (const Tunnel& t : tunnels_) {
    EXPECT_EQ(Ask(t.accept_port, {"GET", "lock:over-tls"}), "(nil)");
  }
  // stunnel verified each master's certificate.
  const std::string log = ReadFile(stunnel_log_);
  EXPECT_NE(log.find("Certificate accepted at depth=0: CN=" + kCertName), std::string::npos) << log;
  EXPECT_EQ(agent.Log().find("AUTH failed"), std::string::npos) << agent.Log();
}

TEST_F(TlsTunnelTest, APlainTcpClientGetsNothingFromATlsPort) {
  // The TLS port takes the TCP connection but answers plain RESP with nothing.
  for (const Tunnel& t : tunnels_) {
    const std::string answer = Ask(t.tls_port, {"PING"});
    EXPECT_TRUE(Dropped(answer)) << answer;
  }
  // Nor can the agent use it without the tunnel.
  std::vector<std::string> direct;
  for (const Tunnel& t : tunnels_)
    direct.push_back("redis://127.0.0.1:" + std::to_string(t.tls_port));
  AgentProcess agent(direct, {"--redis-password-file", PasswordFile()},
                     AgentProcess::Readiness::kSocket);
  const std::string first = "master " + direct.front().substr(8) + ": connect attempt failed";
  ASSERT_TRUE(Eventually([&] { return agent.Log().find(first) != std::string::npos; },
                         milliseconds(10'000)))
      << agent.Log();
  auto client = agent.Connect();
  EXPECT_EQ(client.Acquire("never", 30'000, 0).value("error", ""), "no_quorum");
}

TEST_F(TlsTunnelTest, ATunnelRefusesAMasterWhoseCertificateIsNotForTheCheckedName) {
  // The shipped checkHost (redis-N.example.internal) left as it is: the certificate names
  // localhost, so stunnel must drop every connection rather than talk to that master.
  StartStunnel(std::nullopt, "wrong-name");
  for (const Tunnel& t : tunnels_) {
    const std::string answer = Ask(t.accept_port, {"PING"});
    EXPECT_TRUE(Dropped(answer)) << answer;
  }
  const std::string log = ReadFile(stunnel_log_);
  EXPECT_EQ(log.find("Certificate accepted"), std::string::npos) << log;
  EXPECT_NE(log.find("Rejected by CERT"), std::string::npos) << "stunnel says why\n" << log;
}

}  // namespace
}  // namespace lw::test::tls
