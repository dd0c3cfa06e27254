// Batched lock scripts (redis/script_batch.h) against a real redis-server: every call of a
// batch answers what it answers alone and leaves the same keys behind, an error raised by one
// call is that call's alone; and through a real agent, a burst of acquires reaches each
// master as a few commands, not one per acquire.

#include "redis/script_batch.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "redis/kind_scripts.h"
#include "redis/scripts.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::script_batch {
namespace {

using nlohmann::json;
using ReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

// The bodies in NodeClient's order: scripts.h's three, then kind_scripts.h's.
std::vector<const char*> Bodies() {
  std::vector<const char*> b = {scripts::kDeleteIfHeld, scripts::kExtendIfHeld,
                                scripts::kRaiseFenceIfHeld};
  for (const char* k : scripts::kKindScriptBodies) b.push_back(k);
  return b;
}
constexpr size_t kDelete = 0, kExtend = 1, kRaiseFence = 2;
constexpr size_t kClaimExclusive = 3 + static_cast<size_t>(scripts::KindScript::kClaimExclusive);
constexpr size_t kClaimShared = 3 + static_cast<size_t>(scripts::KindScript::kClaimShared);
constexpr size_t kReleaseTurn = 3 + static_cast<size_t>(scripts::KindScript::kReleaseTurn);

struct Call {
  size_t script;
  std::vector<std::string> keys;  // "@" stands for the namespace prefix
  std::vector<std::string> args;
};

std::vector<std::string_view> Views(const std::vector<std::string>& words) {
  return {words.begin(), words.end()};
}

std::string Prefixed(const std::string& word, const std::string& prefix) {
  return word.starts_with("@") ? prefix + word.substr(1) : word;
}

// INFO <section> of the master at port, "" when it does not answer.
std::string Info(int port, const char* section) {
  redisContext* ctx = redisConnect("127.0.0.1", port);
  if (ctx == nullptr || ctx->err) {
    if (ctx) redisFree(ctx);
    return "";
  }
  ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx, "INFO %s", section)), freeReplyObject);
  redisFree(ctx);
  return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
}

// A reply as text, errors reduced to their first word (the same error reads slightly
// differently raised inside a batch or alone).
std::string Show(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_INTEGER: return std::to_string(r->integer);
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_ERROR: {
      const std::string text(r->str, r->len);
      return "error " + text.substr(0, text.find(' '));
    }
    case REDIS_REPLY_ARRAY: {
      std::string s = "[";
      for (size_t i = 0; i < r->elements; ++i) s += (i ? "," : "") + Show(r->element[i]);
      return s + "]";
    }
    default: return "'" + std::string(r->str, r->len) + "'";
  }
}

class ScriptBatchRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = redisConnect("127.0.0.1", cluster_.port(0));
    ASSERT_TRUE(ctx_ != nullptr && ctx_->err == 0);
  }
  void TearDown() override {
    if (ctx_) redisFree(ctx_);
  }
  ReplyPtr Send(const std::string& resp) {
    redisAppendFormattedCommand(ctx_, resp.data(), resp.size());
    void* r = nullptr;
    EXPECT_EQ(redisGetReply(ctx_, &r), REDIS_OK);
    return {static_cast<redisReply*>(r), freeReplyObject};
  }
  ReplyPtr Run(const std::vector<Call>& calls, const std::string& prefix, const char* body) {
    ScriptBatch b;
    for (const Call& c : calls) {
      std::vector<std::string> keys, args;
      for (const auto& k : c.keys) keys.push_back(Prefixed(k, prefix));
      for (const auto& a : c.args) args.push_back(Prefixed(a, prefix));
      b.Add(c.script, Views(keys), Views(args));
    }
    return Send(b.Command("EVAL", body));
  }
  std::string State(const std::string& key) {
    ReplyPtr type(static_cast<redisReply*>(redisCommand(ctx_, "TYPE %s", key.c_str())),
                  freeReplyObject);
    ReplyPtr value(static_cast<redisReply*>(redisCommand(ctx_, "DUMP %s", key.c_str())),
                   freeReplyObject);
    ReplyPtr ttl(static_cast<redisReply*>(redisCommand(ctx_, "PTTL %s", key.c_str())),
                 freeReplyObject);
    // A ttl is compared by whether there is one (the two runs are a moment apart).
    return Show(type.get()) + " " + Show(value.get()) + " ttl " +
           (ttl->integer >= 0 ? "yes" : std::to_string(ttl->integer));
  }

  RedisCluster cluster_{1};
  redisContext* ctx_ = nullptr;
};

TEST_F(ScriptBatchRedisTest, EveryCallAnswersInABatchWhatItAnswersAloneAndLeavesTheSameKeys) {
  const std::vector<const char*> bodies = Bodies();
  const std::string batch_body = BatchScriptBody(bodies);
  const std::string sep = "\x1f";
  auto exclusive = [&](const std::string& name, const std::string& value, const char* marked) {
    return Call{kClaimExclusive, {"@" + name, "@" + name + sep + "readers",
                                  "@" + name + sep + "writer-waiting"},
                {value, "10000", "1000", value, marked, "ag:", "-1", "0"}};
  };
  const std::vector<Call> calls = {
      exclusive("free", "ag:t1", "0"),                          // taken: 0
      exclusive("held", "ag:t2", "0"),                          // held by another: nil
      {kDelete, {"@hash"}, {"ag:t1", ""}},                      // WRONGTYPE, raised
      {kDelete, {"@held"}, {"ag:other", "chan"}},               // 1
      {kExtend, {"@gone"}, {"ag:t1", "5000"}},                  // 0
      {kRaiseFence, {"@free", "@badfence"}, {"ag:t1", "5"}},    // error reply, returned
      {kClaimShared, {"@taken", "@taken" + sep + "readers", "@taken" + sep + "writer-waiting"},
       {"ag:r1", "10000", "ag:", "-1", "1000"}},                // ['writer']
      exclusive("free", "ag:t3", "1"),                          // nil: call 1 holds it
      {kExtend, {"@free"}, {"ag:t1", "20000"}},                 // 1
      // Turns: agent bg: is refused and queues; the holder's release reserves it for bg:.
      {kClaimExclusive, {"@busy", "@busy" + sep + "readers", "@busy" + sep + "writer-waiting"},
       {"bg:t5", "10000", "1000", "bg:t5", "0", "bg:", "25", "1"}},  // nil
      {kReleaseTurn, {"@busy"}, {"ag:other", "chan", "-1", "200", "ag:"}},  // 1
  };
  for (const std::string prefix : {"alone:", "batch:"}) {
    cluster_.Set(0, prefix + "held", "ag:other", 60'000);
    cluster_.Set(0, prefix + "busy", "ag:other", 60'000);
    cluster_.Set(0, prefix + "badfence", "x", 0);
    cluster_.Set(0, prefix + "taken", "ag:w", 60'000);
    ReplyPtr(static_cast<redisReply*>(redisCommand(ctx_, "HSET %shash f v", prefix.c_str())),
             freeReplyObject);
  }
  std::vector<std::string> alone;
  for (const Call& c : calls) {
    ReplyPtr r = Run({c}, "alone:", bodies[c.script]);
    ASSERT_TRUE(r) << ctx_->errstr;
    alone.push_back(Show(r.get()));
  }
  ReplyPtr batch = Run(calls, "batch:", batch_body.c_str());
  ASSERT_TRUE(batch) << ctx_->errstr;
  ASSERT_EQ(batch->type, REDIS_REPLY_ARRAY) << Show(batch.get());
  ASSERT_EQ(batch->elements, calls.size());
  EXPECT_EQ(alone, (std::vector<std::string>{"0", "nil", "error WRONGTYPE", "1", "0",
                                             "error fence", "['writer']", "nil", "1", "nil",
                                             "1"}));
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(Show(batch->element[i]), alone[i]) << "call " << i;
  }
  // busy: reserved for bg: by the release in turn (its queue entries' scores are the master's
  // clock, which moved between the two runs).
  for (const std::string key : {"free", "held", "hash", "gone", "badfence", "taken", "busy",
                                "free\x1fwriter-waiting", "taken\x1freaders"}) {
    EXPECT_EQ(State("batch:" + key), State("alone:" + key)) << key;
  }
}

// The tables a batch reuses from call to call hold nothing of the call before: an unfenced
// acquire after a fenced one (4 keys, then 3) reads no fence counter.
TEST_F(ScriptBatchRedisTest, ACallSeesNoKeyOrArgumentOfTheCallBeforeIt) {
  const std::vector<const char*> bodies = Bodies();
  const std::string sep = "\x1f";
  cluster_.Set(0, "fence:a", "7", 0);
  const std::vector<Call> calls = {
      {kClaimExclusive, {"a", "a" + sep + "readers", "a" + sep + "w", "fence:a"},
       {"ag:1", "10000", "1000", "ag:1", "0"}},
      {kClaimExclusive, {"b", "b" + sep + "readers", "b" + sep + "w"}, {"ag:2", "10000"}},
  };
  ReplyPtr r = Run(calls, "", BatchScriptBody(bodies).c_str());
  ASSERT_TRUE(r) << ctx_->errstr;
  EXPECT_EQ(Show(r.get()), "[7,0]");
}

// The agent's side: 32 acquires sent in one write reach the master as a handful of EVALSHAs.
TEST(ScriptBatchAgentTest, ABurstOfAcquiresReachesEachMasterAsAFewCommands) {
  RedisCluster cluster(3);
  AgentProcess agent(cluster);
  auto c = agent.Connect();
  cluster.Run(0, {"CONFIG", "RESETSTAT"});  // the handshake's commands are not counted
  constexpr int kBurst = 32;
  std::string lines;
  for (int i = 0; i < kBurst; ++i) {
    lines += json{{"id", i}, {"op", "acquire"}, {"resource", "burst/" + std::to_string(i)},
                  {"ttl_ms", 30'000}}.dump() + "\n";
  }
  c.SendRaw(lines);
  int granted = 0;
  for (int i = 0; i < kBurst; ++i) {
    const auto line = c.ReadLine(std::chrono::seconds(30));
    ASSERT_TRUE(line) << "reply " << i << " missing";
    granted += json::parse(*line).value("ok", false) ? 1 : 0;
  }
  EXPECT_EQ(granted, kBurst);
  const std::string stats = Info(cluster.port(0), "commandstats");
  const size_t at = stats.find("cmdstat_evalsha:calls=");
  ASSERT_NE(at, std::string::npos) << stats;
  const long calls = std::stol(stats.substr(at + 22));
  // One read of the 32 lines queues 32 claims per master: one command, or a few if the
  // kernel split the write across reads. One per acquire would be 32.
  EXPECT_LE(calls, kBurst / 4) << stats;
  EXPECT_EQ(cluster.CountWithKey(KeyOf("burst/0")), 3);

  // With the masters' script caches flushed, the batch falls back to EVAL and still answers
  // every call.
  cluster.ScriptFlush();
  lines.clear();
  for (int i = 0; i < kBurst; ++i) {
    lines += json{{"id", i}, {"op", "acquire"}, {"resource", "again/" + std::to_string(i)},
                  {"ttl_ms", 30'000}}.dump() + "\n";
  }
  c.SendRaw(lines);
  granted = 0;
  for (int i = 0; i < kBurst; ++i) {
    const auto line = c.ReadLine(std::chrono::seconds(30));
    ASSERT_TRUE(line) << "reply " << i << " missing after SCRIPT FLUSH";
    granted += json::parse(*line).value("ok", false) ? 1 : 0;
  }
  EXPECT_EQ(granted, kBurst);
  EXPECT_EQ(cluster.CountWithKey(KeyOf("again/31")), 3);
}

}  // namespace
}  // namespace lw::test::script_batch
