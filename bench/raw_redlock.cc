// The raw limit (see bench/README.md): Redlock cycles sent straight to the masters, with no
// agent, on one thread. One hiredis async connection per master on one libuv loop; C logical
// clients share them, so every command in flight is pipelined.
//
//   lw_bench_raw --masters H:P,H:P,... --mode uncontended|contended|mixed [--clients C]
//                [--seconds S] [--warmup-seconds W] [--ttl-ms T] [--wait-ms W]
//                [--retry-delay-ms D] [--retry-jitter-ms J] [--prefix P] [--key-prefix lock:]
//                [--hot-keys K] [--hot-share F] [--redis-pids P,...] [--label L] [--json FILE]
//                [--claim set|script]
//
// A cycle is what a Redlock client does for an uncontended acquire+release: SET key token NX PX
// ttl on every master (--claim script: the agent's own exclusive-acquire script, which also
// respects readers, as the agent sends it); once all have answered and a majority said OK, the agent's own release script
// (src/redis/scripts.h, loaded with SCRIPT LOAD, called with EVALSHA and the same release
// channel) on every master; once all have answered, the next cycle. An attempt without a
// majority releases what it got and retries after retry_delay_ms + up to retry_jitter_ms until
// wait_ms has passed (the agent queues local waiters instead; the raw loop has nobody to queue
// with). Same output as lw_bench.

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cycle_load.h"
#include "measure.h"
#include "redis/kind_scripts.h"
#include "redis/scripts.h"

namespace lw::bench {
namespace {

struct Master {
  std::string host;
  int port = 0;
  redisAsyncContext* ctx = nullptr;
};

struct RawSettings {
  int64_t ttl_ms = 10'000;
  int64_t wait_ms = 10'000;
  int64_t retry_delay_ms = 10;
  int64_t retry_jitter_ms = 10;
  std::string key_prefix = "lock:";
  std::string sha;  // of scripts::kDeleteIfHeld
  // --claim script: the agent's own exclusive-acquire script (kind_scripts.h kClaimExclusive,
  // which also respects readers) instead of SET NX PX; its SHA1, else "".
  std::string claim_sha;
};

// Loads a script on a master with a blocking connection; returns its SHA1.
std::string LoadScript(const Master& m, const char* body) {
  redisContext* c = redisConnect(m.host.c_str(), m.port);
  if (c == nullptr || c->err) {
    throw std::runtime_error("cannot connect to " + m.host + ":" + std::to_string(m.port));
  }
  auto* r = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %s", body));
  std::string sha =
      r != nullptr && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
  freeReplyObject(r);
  redisFree(c);
  if (sha.empty()) throw std::runtime_error("SCRIPT LOAD failed on " + m.host);
  return sha;
}

class RawClient;
struct Slot {
  RawClient* client;
};

// One logical client: a closed loop of Redlock cycles over the shared connections.
class RawClient {
 public:
  RawClient(uv_loop_t* loop, int index, CycleLoad& load, std::vector<Master>& masters,
            const RawSettings& s, uint64_t seed)
      : index_(index), load_(load), masters_(masters), s_(s), rng_(seed) {
    slot_.client = this;
    uv_timer_init(loop, &retry_);
    retry_.data = this;
  }

  void Start() { NewCycle(); }
  bool done() const { return done_; }
  void Close() { uv_close(reinterpret_cast<uv_handle_t*>(&retry_), nullptr); }

 private:
  void NewCycle() {
    if (load_.over()) {
      done_ = true;
      return;
    }
    pick_ = load_.Choose(index_);
    key_ = s_.key_prefix + *pick_.resource;
    channel_ = scripts::ReleaseChannel(key_);
    first_sent_ = Clock::now();
    Attempt();
  }

  void Attempt() {
    static constexpr char kHex[] = "0123456789abcdef";
    for (int i = 0; i < 40; i += 16) {
      uint64_t x = rng_();
      for (int j = i; j < std::min(40, i + 16); ++j, x >>= 4) token_[j] = kHex[x & 15];
    }
    replies_ = oks_ = 0;
    releasing_ = false;
    const std::string ttl = std::to_string(s_.ttl_ms);
    if (!s_.claim_sha.empty()) {  // KEYS: P R, readers, writer-waiting; ARGV as the agent's
      const std::string readers = key_ + "\x1freaders", waiting = key_ + "\x1fwriter-waiting";
      for (auto& m : masters_) {
        redisAsyncCommand(m.ctx, OnReply, &slot_, "EVALSHA %b 3 %b %b %b %b %b 1000 %b 0",
                          s_.claim_sha.data(), s_.claim_sha.size(), key_.data(), key_.size(),
                          readers.data(), readers.size(), waiting.data(), waiting.size(),
                          token_, size_t{40}, ttl.data(), ttl.size(), token_, size_t{40});
      }
      return;
    }
    for (auto& m : masters_) {
      redisAsyncCommand(m.ctx, OnReply, &slot_, "SET %b %b NX PX %b", key_.data(), key_.size(),
                        token_, size_t{40}, ttl.data(), ttl.size());
    }
  }

  void ReleaseAll() {
    replies_ = 0;
    releasing_ = true;
    for (auto& m : masters_) {
      redisAsyncCommand(m.ctx, OnReply, &slot_, "EVALSHA %b 1 %b %b %b", s_.sha.data(),
                        s_.sha.size(), key_.data(), key_.size(), token_, size_t{40},
                        channel_.data(), channel_.size());
    }
  }

  static void OnReply(redisAsyncContext*, void* reply, void* privdata) {
    auto* self = static_cast<Slot*>(privdata)->client;
    const auto* r = static_cast<redisReply*>(reply);
    if (r == nullptr) return;  // disconnected: the loop ends without this client finishing
    ++self->replies_;
    // Taken: SET's +OK, or the claim script's integer (nil or an array when refused).
    if (!self->releasing_ &&
        (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_INTEGER)) {
      ++self->oks_;
    }
    if (self->releasing_ && r->type == REDIS_REPLY_ERROR) ++self->release_errors_;
    if (self->replies_ < static_cast<int>(self->masters_.size())) return;
    self->AllAnswered();
  }

  void AllAnswered() {
    const int quorum = static_cast<int>(masters_.size()) / 2 + 1;
    if (!releasing_) {
      granted_ = oks_ >= quorum;
      if (granted_) {
        load_.Granted(pick_, first_sent_);
        load_.ReleaseSent(pick_);
      }
      ReleaseAll();  // the grant, or the partial votes of a failed attempt
      return;
    }
    if (granted_) {
      if (release_errors_ > 0) {
        load_.ReleaseFailed("error_reply");
      } else {
        load_.CycleDone();
      }
      release_errors_ = 0;
      NewCycle();
      return;
    }
    if (load_.over()) {  // the window closed while this client waited: stop, no verdict
      done_ = true;
      return;
    }
    if (Clock::now() - first_sent_ >= std::chrono::milliseconds(s_.wait_ms)) {
      load_.AcquireFailed("timeout");
      NewCycle();
      return;
    }
    const auto jitter =
        s_.retry_jitter_ms > 0
            ? static_cast<int64_t>(rng_() % static_cast<uint64_t>(s_.retry_jitter_ms + 1))
            : 0;
    uv_timer_start(
        &retry_, [](uv_timer_t* t) { static_cast<RawClient*>(t->data)->Attempt(); },
        static_cast<uint64_t>(s_.retry_delay_ms + jitter), 0);
  }

  int index_;
  CycleLoad& load_;
  std::vector<Master>& masters_;
  const RawSettings& s_;
  std::mt19937_64 rng_;
  Slot slot_{};
  uv_timer_t retry_{};
  Pick pick_{};
  std::string key_, channel_;
  char token_[40]{};
  Clock::time_point first_sent_;
  int replies_ = 0, oks_ = 0, release_errors_ = 0;
  bool releasing_ = false, granted_ = false, done_ = false;
};

int Run(const Flags& f) {
  const LoadShape shape = ShapeFromFlags(f);
  RawSettings s;
  s.ttl_ms = f.Int("ttl-ms", 10'000);
  s.wait_ms = f.Int("wait-ms", 10'000);
  s.retry_delay_ms = f.Int("retry-delay-ms", 10);
  s.retry_jitter_ms = f.Int("retry-jitter-ms", 10);
  s.key_prefix = f.Str("key-prefix", "lock:");
  const std::vector<int> redis = Pids(f.List("redis-pids"));

  std::vector<Master> masters;
  for (const auto& hp : f.List("masters")) {
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos) throw std::invalid_argument("--masters wants HOST:PORT,...");
    masters.push_back({hp.substr(0, colon), std::atoi(hp.c_str() + colon + 1), nullptr});
  }
  if (masters.empty()) throw std::invalid_argument("--masters is required");
  const std::string claim = f.Str("claim", "set");
  if (claim != "set" && claim != "script") throw std::invalid_argument("--claim set|script");
  for (const auto& m : masters) {
    const std::string sha = LoadScript(m, scripts::kDeleteIfHeld);
    if (!s.sha.empty() && sha != s.sha) throw std::runtime_error("masters disagree on the SHA1");
    s.sha = sha;
    if (claim == "script") s.claim_sha = LoadScript(m, scripts::kClaimExclusive);
  }

  uv_loop_t* loop = uv_default_loop();
  for (auto& m : masters) {
    m.ctx = redisAsyncConnect(m.host.c_str(), m.port);
    if (m.ctx == nullptr || m.ctx->err) throw std::runtime_error("cannot connect to " + m.host);
    redisLibuvAttach(m.ctx, loop);
  }
  CycleLoad load(shape);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < shape.clients; ++i) {
    clients.push_back(
        std::make_unique<RawClient>(loop, i, load, masters, s, 1000 + static_cast<uint64_t>(i)));
  }
  const std::vector<int> self{static_cast<int>(getpid())};
  CpuWindow cpu({redis, self});
  load.StartWindow(loop, [&] { cpu.Begin(); }, [&] { cpu.End(); });
  for (auto& c : clients) c->Start();
  for (;;) {
    bool all_done = true;
    for (auto& c : clients) all_done = all_done && c->done();
    if (all_done) break;
    if (uv_run(loop, UV_RUN_ONCE) == 0) break;  // nothing left to wait for: masters gone
  }
  bool finished = true;
  for (auto& c : clients) {
    finished = finished && c->done();
    c->Close();
  }
  for (auto& m : masters) redisAsyncDisconnect(m.ctx);
  uv_run(loop, UV_RUN_DEFAULT);

  Result r;
  r.Text("bench", "raw");
  r.Text("label", f.Str("label", "raw"));
  load.Report(r);
  const double k = static_cast<double>(load.cycles()) / 1000.0;
  if (!redis.empty()) r.Number("redis_cpu_s_per_1k", k > 0 ? cpu.seconds(0) / k : 0, 4);
  r.Number("bench_cpu_s_per_1k", k > 0 ? cpu.seconds(1) / k : 0, 4);
  r.Number("broken_connections", finished ? 0 : 1);
  if (!r.Emit(f.Str("json", ""))) return 2;
  return finished && load.failures() == 0 && load.cycles() > 0 ? 0 : 1;
}

}  // namespace
}  // namespace lw::bench

int main(int argc, char** argv) {
  try {
    const lw::bench::Flags f(argc, argv,
                             {"masters", "mode", "clients", "seconds", "warmup-seconds", "ttl-ms",
                              "wait-ms", "retry-delay-ms", "retry-jitter-ms", "prefix",
                              "key-prefix", "hot-keys", "hot-share", "redis-pids", "label", "json",
                              "claim"},
                             {});
    return lw::bench::Run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lw_bench_raw: %s\n", e.what());
    return 2;
  }
}
