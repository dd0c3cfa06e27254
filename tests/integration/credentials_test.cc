// Redis credentials against real masters: masters that require a password (requirepass), and an
// ACL user with the smallest ACL docs/security.md gives. The password comes from
// redis_password_file or LOCKWARDEN_REDIS_PASSWORD; every connection of the agent authenticates
// (locks, release announcements, the leak scanner, presence checks); a wrong password reaches no
// master and is never shown: not in the log, health, /api/v1/state, /api/v1/leaks or /metrics.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <sstream>

#include "metrics_util.h"
#include "state_util.h"
#include "support/agent_process.h"
#include "support/files.h"
#include "support/http.h"
#include "support/redis_cluster.h"
#include "test_util.h"

#ifndef LOCKWARDEN_SOURCE_DIR
#error "LOCKWARDEN_SOURCE_DIR must name the source tree (set by tests/CMakeLists.txt)"
#endif

namespace lw::test::credentials {
namespace {

using nlohmann::json;

// The waiting agent of a hand-off retries only after 20 s: a grant well within 10 s of the
// wait's start was the release announcement's doing, whatever the load of the box.
constexpr int kRetryDelayMs = 20'000;
// Longer than the retry delay, shorter than the client's 60 s call timeout.
constexpr int64_t kHandOffWaitMs = 40'000;
const std::string kAdminToken = "credentials-test-admin-token-0123";

// A password no log line or page could hold by chance: a tag and 64 random bits.
std::string DistinctivePassword(const std::string& tag) {
  std::random_device device;
  std::ostringstream out;
  out << "lwpw-" << tag << "-" << std::hex << device() << device();
  return out.str();
}

HttpHeaders Bearer() { return {{"Authorization", "Bearer " + kAdminToken}}; }

// Everything the admin listener shows, concatenated: health, readiness, state, leaks, metrics.
std::string EveryAdminBody(int port) {
  std::string all;
  for (const char* path : {"/healthz", "/readyz", "/api/v1/state", "/api/v1/leaks", "/metrics"}) {
    HttpResult r = HttpGet(port, path, Bearer());
    all += std::string(path) + " " + std::to_string(r.status) + "\n" + r.body + "\n";
  }
  return all;
}

// The report of a scan pass that started after this call.
json FreshLeaks(int port) {
  const int64_t asked =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  json leaks;
  const bool fresh = Eventually(
      [&] {
        HttpResult r = HttpGet(port, "/api/v1/leaks", Bearer());
        leaks = r.status == 200 ? json::parse(r.body) : json::object();
        const json pass = leaks.value("last_pass", json());
        return pass.is_object() && pass.value("started_unix_ms", int64_t{0}) > asked;
      },
      milliseconds(20'000));
  EXPECT_TRUE(fresh) << "no scan pass completed within 20 s: " << leaks;
  return leaks;
}

bool HasLeak(const json& leaks, const std::string& master, const std::string& key) {
  for (const auto& leak : leaks.value("leaks", json::array())) {
    if (leak["master"] == master && leak["key"] == key) return true;
  }
  return false;
}

std::vector<std::string> PresenceOf(const json& state, const std::string& resource) {
  for (const json& lock : state.value("locks", json::array())) {
    if (lock["resource"] != resource) continue;
    std::vector<std::string> out;
    for (const json& p : lock["presence"]) out.push_back(p);
    return out;
  }
  return {};
}

// Lines of the log that say an authentication or permission failed.
std::string AuthTrouble(const std::string& log) {
  std::istringstream lines(log);
  std::string line, trouble;
  for (const char* marker :
       {"NOAUTH", "WRONGPASS", "NOPERM", "AUTH failed", "refused the subscription",
        "INFO server failed", "leak scan of", "presence probe"}) {
    lines.clear();
    lines.seekg(0);
    while (std::getline(lines, line)) {
      if (line.find(marker) != std::string::npos) trouble += line + "\n";
    }
  }
  return trouble;
}

class CredentialsFixture : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("lw-creds-"); }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Two agents, a holds "r"; a client of b waits for it (b retries only every 20 s); once every
  // master counts b's subscription, a releases. Returns ms from the start of b's wait to its
  // grant: its retry timer cannot have fired before kRetryDelayMs.
  double HandOff(RedisCluster& cluster, AgentProcess& a, AgentProcess& b) {
    const std::string channel = "lockwarden:released:" + KeyOf("r");
    auto holder = a.Connect();
    const json held = holder.Acquire("r", 30'000, 0);
    EXPECT_TRUE(held.value("ok", false)) << held.dump();
    const auto asked = SteadyClock::now();
    auto waiting = std::async(std::launch::async, [&b] {
      auto c = b.Connect();
      json reply = c.Acquire("r", 10'000, kHandOffWaitMs);
      return std::make_pair(reply, SteadyClock::now());
    });
    const bool listening = Eventually(
        [&] {
          for (int i = 0; i < cluster.size(); ++i) {
            if (cluster.NumSub(i, channel) < 1) return false;
          }
          return true;
        },
        milliseconds(kRetryDelayMs / 4));
    if (!listening) {
      ADD_FAILURE() << "b never subscribed to the release announcements\n" << b.Log();
      return 1e9;
    }
    const json released = holder.Release("r", held["token"]);
    EXPECT_TRUE(released.value("ok", false)) << released.dump();
    const auto [reply, answered] = waiting.get();
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump() << b.Log();
    return std::chrono::duration<double, std::milli>(answered - asked).count();
  }

  std::string TokenFile() { return WriteFile(dir_ + "/admin.token", kAdminToken + "\n"); }

  std::string dir_;
};

// ---------------------------------------------------------------------------------------------
// Masters with requirepass.

class CredentialsTest : public CredentialsFixture {
 protected:
  const std::string password_ = DistinctivePassword("right");
  RedisCluster cluster_{3, RedisClusterOptions{{"--requirepass", password_}, password_}};
};

TEST_F(CredentialsTest, TheMastersRefuseAConnectionWithoutThePassword) {
  // What makes the rest meaningful: an agent that skipped AUTH would get nothing done.
  redisContext* ctx = redisConnect("127.0.0.1", cluster_.port(0));
  ASSERT_TRUE(ctx != nullptr && ctx->err == 0);
  auto* reply = static_cast<redisReply*>(redisCommand(ctx, "GET x"));
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(reply->str, reply->len).rfind("NOAUTH", 0), 0u) << reply->str;
  freeReplyObject(reply);
  redisFree(ctx);
}

TEST_F(CredentialsTest, APasswordFileGrantsLocksAndTheScannerAndPresenceChecksAuthenticate) {
  const std::string pw_file = WriteFile(dir_ + "/redis.pw", password_ + "\n");
  AgentProcess agent(cluster_, {"--redis-password-file", pw_file, "--scan-interval-ms", "200",
                                "--admin-token-file", TokenFile()});
  auto client = agent.Connect();
  const json grant = client.Acquire("creds", 30'000, 1'000);
  ASSERT_TRUE(grant.value("ok", false)) << grant << agent.Log();
  const std::string token = grant["token"];
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("creds"), token, 3), 3);
  EXPECT_TRUE(client.Extend("creds", token, 40'000).value("ok", false));
  const json fenced = client.Acquire("fenced", 30'000, 1'000, false, milliseconds(60'000), true);
  ASSERT_TRUE(fenced.value("ok", false)) << fenced;
  EXPECT_TRUE(fenced["fence"].is_number()) << fenced;

  // Presence checks (GET on each master, from their own connections).
  const json state = StateWhen(agent, [](const json& s) {
    return PresenceOf(s, "creds") == std::vector<std::string>{"held", "held", "held"};
  });
  EXPECT_EQ(PresenceOf(state, "creds"), (std::vector<std::string>{"held", "held", "held"}))
      << state.dump(1);

  // The scanner (its own connections) finds a leaked key.
  cluster_.Set(1, "lock:leaked-behind-a-password", "x", 0);
  const json leaks = FreshLeaks(agent.admin_port());
  EXPECT_TRUE(HasLeak(leaks, "127.0.0.1:" + std::to_string(cluster_.port(1)),
                      "lock:leaked-behind-a-password"))
      << leaks.dump(1);

  EXPECT_TRUE(client.Release("creds", token).value("ok", false));
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("creds")), 0);
  const std::string log = agent.Log();
  EXPECT_EQ(AuthTrouble(log), "");
  EXPECT_EQ(log.find(password_), std::string::npos) << "the password is in the log";
  EXPECT_EQ(EveryAdminBody(agent.admin_port()).find(password_), std::string::npos);
}

TEST_F(CredentialsTest, TheSubscribeConnectionsAuthenticateTooSoAHandOffWakesAtOnce) {
  const std::string pw_file = WriteFile(dir_ + "/redis.pw", password_ + "\n");
  AgentProcess a(cluster_, {"--redis-password-file", pw_file});
  AgentProcess b(cluster_, {"--redis-password-file", pw_file, "--retry-delay-ms",
                            std::to_string(kRetryDelayMs), "--retry-jitter-ms", "0"});
  const double ms = HandOff(cluster_, a, b);
  EXPECT_LT(ms, kRetryDelayMs / 2) << "the grant waited for the retry timer, not the announcement\n"
                                   << b.Log();
  EXPECT_GE(MetricNow(b.admin_port(), "lockwarden_release_wakeups_total"), 1);
  EXPECT_EQ(AuthTrouble(a.Log()), "");
  EXPECT_EQ(AuthTrouble(b.Log()), "");
}

TEST_F(CredentialsTest, TheEnvironmentPasswordWorksAndStaysOffTheCommandLine) {
  // Only in the agent's environment (the fixture passes no LOCKWARDEN_* variable of ours).
  AgentProcess agent(cluster_.urls(), {}, AgentProcess::Readiness::kAllMasters,
                     {"LOCKWARDEN_REDIS_PASSWORD=" + password_});
  auto client = agent.Connect();
  const json grant = client.Acquire("env", 30'000, 1'000);
  ASSERT_TRUE(grant.value("ok", false)) << grant << agent.Log();
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("env"), grant["token"], 3), 3);
  const std::string cmdline = ReadFile("/proc/" + std::to_string(agent.pid()) + "/cmdline");
  ASSERT_NE(cmdline.find("serve"), std::string::npos) << "not the agent's command line";
  EXPECT_EQ(cmdline.find(password_), std::string::npos);
  EXPECT_EQ(agent.Log().find(password_), std::string::npos);
}

TEST_F(CredentialsTest, AWrongPasswordReachesNoMasterAndIsNeverShown) {
  const std::string wrong = DistinctivePassword("wrong");
  ASSERT_GE(wrong.size(), 20u);
  ASSERT_EQ(password_.find(wrong), std::string::npos);
  const std::string pw_file = WriteFile(dir_ + "/redis.pw", wrong + "\n");
  ASSERT_NE(ReadFile(pw_file).find(wrong), std::string::npos) << "the search itself works";
  AgentProcess agent(cluster_,
                     {"--redis-password-file", pw_file, "--scan-interval-ms", "200",
                      "--admin-token-file", TokenFile()},
                     AgentProcess::Readiness::kSocket);
  // Every master refused the lock connection's AUTH, and the scanner's.
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string log = agent.Log();
        for (int i = 0; i < cluster_.size(); ++i) {
          const std::string master = "127.0.0.1:" + std::to_string(cluster_.port(i));
          if (log.find("master " + master + ": connect attempt failed: AUTH failed: WRONGPASS") ==
                  std::string::npos ||
              log.find("leak scan of " + master + " failed: " + master +
                       ": AUTH failed: WRONGPASS") == std::string::npos) {
            return false;
          }
        }
        return true;
      },
      milliseconds(20'000)))
      << agent.Log();

  auto client = agent.Connect();
  const json refused = client.Acquire("never", 30'000, 0);
  EXPECT_FALSE(refused.value("ok", true)) << refused;
  EXPECT_EQ(refused.value("error", ""), "no_quorum") << refused;
  const json health = client.Health();
  for (const json& node : health["nodes"]) EXPECT_FALSE(node.value("up", true)) << node;
  EXPECT_EQ(HttpGet(agent.admin_port(), "/readyz").status, 503);

  const std::string shown = health.dump() + EveryAdminBody(agent.admin_port()) + agent.Log();
  EXPECT_NE(shown.find("WRONGPASS"), std::string::npos) << "the failure itself is explained";
  EXPECT_EQ(shown.find(wrong), std::string::npos) << shown;
  EXPECT_EQ(shown.find(password_), std::string::npos);
  const std::string cmdline = ReadFile("/proc/" + std::to_string(agent.pid()) + "/cmdline");
  EXPECT_EQ(cmdline.find(wrong), std::string::npos);
}

TEST_F(CredentialsTest, ThePasswordFlagIsRefusedWithoutEchoingIt) {
  const std::string out = dir_ + "/serve.out";
  const pid_t pid =
      SpawnTestProcess({LockwardenBinary(), "serve", "--socket", dir_ + "/a.sock", "--master",
                        cluster_.url(0), "--admin-listen", "off", "--redis-password", password_},
                       out);
  const int code = WaitChild(pid, milliseconds(20'000));
  EXPECT_GT(code, 0) << ReadFile(out);
  const std::string said = ReadFile(out);
  EXPECT_NE(said.find("redis_password (flag --redis-password): a password on the command line is "
                      "visible to every user of the host"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find(password_), std::string::npos) << said;
}

// ---------------------------------------------------------------------------------------------
// The ACL user of docs/security.md, with the default user locked behind its own password, so a
// connection that skipped AUTH (or authenticated as someone else) could do nothing.

// The one line of docs/security.md that starts with "ACL SETUSER lockwarden ", split in words.
std::vector<std::string> DocumentedAcl() {
  const std::string doc = ReadFile(std::string(LOCKWARDEN_SOURCE_DIR) + "/docs/security.md");
  std::istringstream lines(doc);
  std::string line;
  std::vector<std::string> found;
  while (std::getline(lines, line)) {
    if (line.rfind("ACL SETUSER lockwarden ", 0) == 0) found.push_back(line);
  }
  if (found.size() != 1) {
    ADD_FAILURE() << "docs/security.md has " << found.size()
                  << " lines starting with \"ACL SETUSER lockwarden \"; want exactly 1";
    return {};
  }
  std::istringstream words(found.front());
  std::vector<std::string> out;
  for (std::string w; words >> w;) out.push_back(w);
  return out;
}

// Runs a command as `user` on 127.0.0.1:port; the reply as text ("(error) ..." for errors).
std::string RunAs(int port, const std::string& user, const std::string& password,
                  const std::vector<std::string>& command) {
  redisContext* ctx = redisConnect("127.0.0.1", port);
  if (ctx == nullptr || ctx->err) {
    if (ctx) redisFree(ctx);
    return "(no connection)";
  }
  std::string out;
  auto* auth = static_cast<redisReply*>(
      redisCommand(ctx, "AUTH %b %b", user.data(), user.size(), password.data(), password.size()));
  if (auth == nullptr || auth->type == REDIS_REPLY_ERROR) {
    out = "(auth failed)";
  } else {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : command) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r == nullptr) {
      out = "(no reply)";
    } else {
      if (r->type == REDIS_REPLY_NIL) {
        out = "(nil)";
      } else {
        out = (r->type == REDIS_REPLY_ERROR ? "(error) " : "") +
              (r->str ? std::string(r->str, r->len) : std::to_string(r->integer));
      }
      freeReplyObject(r);
    }
  }
  if (auth) freeReplyObject(auth);
  redisFree(ctx);
  return out;
}

class CredentialsAclTest : public CredentialsFixture {
 protected:
  void SetUp() override {
    CredentialsFixture::SetUp();
    std::vector<std::string> acl = DocumentedAcl();
    ASSERT_FALSE(acl.empty());
    bool replaced = false;
    for (std::string& word : acl) {
      if (word == ">CHANGE-ME") {
        word = ">" + user_password_;
        replaced = true;
      }
    }
    ASSERT_TRUE(replaced) << "the documented line has no >CHANGE-ME to replace";
    for (int i = 0; i < cluster_.size(); ++i) ASSERT_NO_THROW(cluster_.Run(i, acl));
    pw_file_ = WriteFile(dir_ + "/redis.pw", user_password_ + "\n");
  }

  std::vector<std::string> AsLockwarden(std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--redis-user", "lockwarden", "--redis-password-file",
                                     pw_file_};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  const std::string admin_password_ = DistinctivePassword("admin");
  const std::string user_password_ = DistinctivePassword("acl");
  RedisCluster cluster_{3,
                        RedisClusterOptions{{"--requirepass", admin_password_}, admin_password_}};
  std::string pw_file_;
};

TEST_F(CredentialsAclTest, TheDocumentedAclIsEnoughForEveryFeatureAndNoMore) {
  AgentProcess agent(
      cluster_, AsLockwarden({"--scan-interval-ms", "200", "--admin-token-file", TokenFile()}));
  auto client = agent.Connect();
  const json grant = client.Acquire("acl", 30'000, 1'000);
  ASSERT_TRUE(grant.value("ok", false)) << grant << agent.Log();
  const std::string token = grant["token"];
  EXPECT_EQ(cluster_.AwaitHoldingGrant(KeyOf("acl"), token, 3), 3);
  EXPECT_TRUE(client.Extend("acl", token, 40'000).value("ok", false)) << agent.Log();
  const json fenced = client.Acquire("fenced", 30'000, 1'000, false, milliseconds(60'000), true);
  ASSERT_TRUE(fenced.value("ok", false)) << fenced << agent.Log();
  EXPECT_TRUE(fenced["fence"].is_number()) << fenced;
  EXPECT_EQ(cluster_.CountWithKey("fence:fenced"), 3);
  EXPECT_TRUE(client.Release("fenced", fenced["token"]).value("ok", false));
  // A fenced permit of a semaphore, and a shared hold extended and released (their scripts use
  // EXISTS, TIME and the sorted-set commands).
  const json permit = client.Call({{"op", "acquire"}, {"resource", "pool"}, {"permits", 2},
                                   {"fence", true}, {"ttl_ms", 30'000}, {"wait_ms", 1'000}});
  ASSERT_TRUE(permit.value("ok", false)) << permit << agent.Log();
  EXPECT_TRUE(client.Extend("pool", permit["token"], 40'000).value("ok", false)) << agent.Log();
  EXPECT_TRUE(client.Release("pool", permit["token"]).value("ok", false)) << agent.Log();
  const json shared = client.Call({{"op", "acquire"}, {"resource", "cfg"}, {"shared", true},
                                   {"ttl_ms", 30'000}, {"wait_ms", 1'000}});
  ASSERT_TRUE(shared.value("ok", false)) << shared << agent.Log();
  EXPECT_TRUE(client.Extend("cfg", shared["token"], 40'000).value("ok", false)) << agent.Log();
  EXPECT_TRUE(client.Release("cfg", shared["token"]).value("ok", false)) << agent.Log();

  const json state = StateWhen(agent, [](const json& s) {
    return PresenceOf(s, "acl") == std::vector<std::string>{"held", "held", "held"};
  });
  EXPECT_EQ(PresenceOf(state, "acl"), (std::vector<std::string>{"held", "held", "held"}))
      << state.dump(1);
  // INFO server answered: the agent knows each master's run_id.
  for (const json& m : state["masters"]) EXPECT_NE(m.value("run_id", ""), "") << m;

  // The scanner finds a leak, and the remedy (EVAL: PTTL, DEL) removes it.
  const std::string master0 = "127.0.0.1:" + std::to_string(cluster_.port(0));
  cluster_.Set(0, "lock:leaked-under-acl", "x", 0);
  ASSERT_TRUE(HasLeak(FreshLeaks(agent.admin_port()), master0, "lock:leaked-under-acl"));
  HttpResult removed =
      HttpPost(agent.admin_port(), "/api/v1/leaks/delete",
               json{{"master", master0}, {"key", "lock:leaked-under-acl"}}.dump(), Bearer());
  EXPECT_EQ(removed.status, 200) << removed.body << agent.Log();
  EXPECT_EQ(cluster_.Pttl(0, "lock:leaked-under-acl"), -2);

  EXPECT_TRUE(client.Release("acl", token).value("ok", false)) << agent.Log();
  EXPECT_EQ(cluster_.CountWithKey(KeyOf("acl")), 0);
  EXPECT_EQ(AuthTrouble(agent.Log()), "");

  // And no more than the documented rights.
  const int port = cluster_.port(0);
  auto as_lockwarden = [&](const std::vector<std::string>& command) {
    return RunAs(port, "lockwarden", user_password_, command);
  };
  cluster_.Set(0, "cache:other", "x", 60'000);
  EXPECT_EQ(as_lockwarden({"GET", "lock:anything"}), "(nil)") << "its own keys: allowed";
  for (const std::vector<std::string>& forbidden :
       std::vector<std::vector<std::string>>{{"GET", "cache:other"},
                                             {"FLUSHALL"},
                                             {"CONFIG", "GET", "requirepass"},
                                             {"KEYS", "*"},
                                             {"PUBLISH", "other-channel", "x"},
                                             {"SET", "cache:other", "y"}}) {
    EXPECT_EQ(as_lockwarden(forbidden).rfind("(error) NOPERM", 0), 0u) << forbidden[0];
  }
  EXPECT_EQ(cluster_.Get(0, "cache:other"), "x");
}

TEST_F(CredentialsAclTest, ReleaseAnnouncementsAndSubscriptionsPassTheAcl) {
  AgentProcess a(cluster_, AsLockwarden());
  AgentProcess b(cluster_, AsLockwarden({"--retry-delay-ms", std::to_string(kRetryDelayMs),
                                         "--retry-jitter-ms", "0"}));
  const double ms = HandOff(cluster_, a, b);
  EXPECT_LT(ms, kRetryDelayMs / 2) << "the grant waited for the retry timer, not the announcement\n"
                                   << b.Log();
  EXPECT_GE(MetricNow(b.admin_port(), "lockwarden_release_wakeups_total"), 1);
  // Nobody in b wants "r" any more: UNSUBSCRIBE passes too (else the subscriptions would linger
  // until the idle connection closes, 30 s later).
  EXPECT_TRUE(Eventually(
      [&] {
        for (int i = 0; i < cluster_.size(); ++i) {
          if (cluster_.NumSub(i, "lockwarden:released:" + KeyOf("r")) != 0) return false;
        }
        return true;
      },
      milliseconds(15'000)))
      << b.Log();

  // A waiter that gives up (UNSUBSCRIBE from its key's channel) costs the others nothing: a
  // refused UNSUBSCRIBE would end the whole subscribe connection and the others' wakeups.
  auto holder = a.Connect();
  const json r = holder.Acquire("r", 30'000, 0);
  const json s = holder.Acquire("s", 30'000, 0);
  ASSERT_TRUE(r.value("ok", false) && s.value("ok", false)) << r << s;
  const auto asked = SteadyClock::now();
  auto waiting = std::async(std::launch::async, [&b] {
    auto c = b.Connect();
    json reply = c.Acquire("r", 10'000, kHandOffWaitMs);
    return std::make_pair(reply, SteadyClock::now());
  });
  auto quitter = b.Connect();
  const json gave_up = quitter.Acquire("s", 30'000, 500);
  EXPECT_EQ(gave_up.value("error", ""), "timeout") << gave_up;
  ASSERT_TRUE(Eventually(
      [&] {
        for (int i = 0; i < cluster_.size(); ++i) {
          if (cluster_.NumSub(i, "lockwarden:released:" + KeyOf("s")) != 0 ||
              cluster_.NumSub(i, "lockwarden:released:" + KeyOf("r")) != 1) {
            return false;
          }
        }
        return true;
      },
      milliseconds(kRetryDelayMs / 4)))
      << b.Log();
  ASSERT_TRUE(holder.Release("r", r["token"]).value("ok", false));
  const auto [reply, answered] = waiting.get();
  EXPECT_TRUE(reply.value("ok", false)) << reply;
  // Well before b's retry timer (20 s after the wait began) could have fired.
  const double woke_ms = std::chrono::duration<double, std::milli>(answered - asked).count();
  EXPECT_LT(woke_ms, kRetryDelayMs / 2) << b.Log();
  EXPECT_EQ(AuthTrouble(a.Log()), "");
  EXPECT_EQ(AuthTrouble(b.Log()), "");
}

TEST_F(CredentialsAclTest, AWrongUserPasswordReachesNoMaster) {
  const std::string wrong = DistinctivePassword("wrong-acl");
  const std::string pw_file = WriteFile(dir_ + "/wrong.pw", wrong + "\n");
  AgentProcess agent(cluster_, {"--redis-user", "lockwarden", "--redis-password-file", pw_file},
                     AgentProcess::Readiness::kSocket);
  ASSERT_TRUE(
      Eventually([&] { return agent.Log().find("AUTH failed: WRONGPASS") != std::string::npos; },
                 milliseconds(20'000)))
      << agent.Log();
  auto client = agent.Connect();
  EXPECT_EQ(client.Acquire("never", 30'000, 0).value("error", ""), "no_quorum");
  const std::string shown = agent.Log() + EveryAdminBody(agent.admin_port());
  EXPECT_EQ(shown.find(wrong), std::string::npos);
  EXPECT_EQ(shown.find(user_password_), std::string::npos);
}

}  // namespace
}  // namespace lw::test::credentials
