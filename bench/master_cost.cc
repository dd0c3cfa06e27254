// What one lock call costs a master, by how it is sent (issue 37, "the batch path's own cost";
// bench/README.md "A master's CPU per call").
//
//   lw_bench_master_cost --master HOST:PORT [--calls 100000] [--sizes 1,8,32,64]
//
// The master must run on this host: its CPU is read from /proc/<process_id>/schedstat (the
// scheduler's run time, in ns) before and after each phase, and it is FLUSHALLed between
// sizes. A phase sends `calls` calls, in groups of N (each size): N commands pipelined, or one
// command carrying N calls, then waits for every answer before the next group; the master is
// idle meanwhile, so its run time is the calls' own cost, reading and answering included.
// Every key is distinct (lock:bench/m<i>): each acquire is granted and each release finds its
// hold, the uncontended mutex's cycle.
//
// Ways a call is sent:
//   set-nx          SET key value NX PX ttl, one command per call
//   script          EVALSHA of the call's own script, one command per call
//   batch           one EVALSHA of the agent's batch script (redis/script_batch.h) over the
//                   same bodies the agent loads, carrying the N calls
// Acquires: set-nx, and kClaimExclusive (as the agent sends a first attempt that asks nobody)
// by script and batch. Releases: kReleaseTurn (the agent's release of a mutex that takes
// turns) and kDeleteIfHeld (compare-and-delete alone), each by script and batch.

#include <hiredis/hiredis.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "redis/kind_scripts.h"
#include "redis/script_batch.h"
#include "redis/scripts.h"

namespace lw::bench {
namespace {

// The bodies the agent's batch script is built over, in its order (redis/node_client_scripts.cc).
std::vector<const char*> AgentBodies() {
  std::vector<const char*> b = {scripts::kDeleteIfHeld, scripts::kExtendIfHeld,
                                scripts::kRaiseFenceIfHeld};
  for (const char* body : scripts::kKindScriptBodies) b.push_back(body);
  return b;
}
constexpr size_t kDeleteIndex = 0;
constexpr size_t kClaimIndex = 3 + static_cast<size_t>(scripts::KindScript::kClaimExclusive);
constexpr size_t kTurnIndex = 3 + static_cast<size_t>(scripts::KindScript::kReleaseTurn);

const std::string kAgent = "f3a9c1d2e4b5a6c7";  // an agent id, as a value prefix is
const std::string kTtl = "10000";

std::string Key(size_t i) { return "lock:bench/m" + std::to_string(i); }
std::string Value(size_t i) { return kAgent + ":" + std::to_string(1'000'000'000'000 + i); }

class Master {
 public:
  Master(const std::string& host, int port) : c_(redisConnect(host.c_str(), port)) {
    if (c_ == nullptr || c_->err) throw std::runtime_error("cannot connect to the master");
    const std::string info = Text("INFO server");
    const size_t at = info.find("process_id:");
    if (at == std::string::npos) throw std::runtime_error("INFO server has no process_id");
    pid_ = std::atoi(info.c_str() + at + 11);
  }
  ~Master() { redisFree(c_); }

  // The master's run time so far, in ns.
  double RunNs() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/schedstat");
    double ns = 0;
    if (!(in >> ns)) throw std::runtime_error("cannot read the master's schedstat (not local?)");
    return ns;
  }

  std::string Text(const char* command) {
    auto* r = static_cast<redisReply*>(redisCommand(c_, command));
    std::string out = r != nullptr && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len)
                      : r != nullptr && r->type == REDIS_REPLY_STATUS ? std::string(r->str, r->len)
                                                                       : "";
    freeReplyObject(r);
    return out;
  }
  std::string Load(const std::string& body) {
    const char* argv[] = {"SCRIPT", "LOAD", body.c_str()};
    const size_t lens[] = {6, 4, body.size()};
    auto* r = static_cast<redisReply*>(redisCommandArgv(c_, 3, argv, lens));
    std::string sha = r != nullptr && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len)
                                                                     : "";
    freeReplyObject(r);
    if (sha.empty()) throw std::runtime_error("SCRIPT LOAD failed");
    return sha;
  }

  void Append(const std::vector<std::string>& words) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& w : words) {
      argv.push_back(w.data());
      lens.push_back(w.size());
    }
    redisAppendCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data());
  }
  void AppendRaw(const std::string& resp) {
    if (redisAppendFormattedCommand(c_, resp.data(), resp.size()) != REDIS_OK) {
      throw std::runtime_error("cannot append a command");
    }
  }
  // Reads n replies; counts the calls they answer that did what was asked (an OK, a whole
  // number >= 0 or 1, or every element of a batch's array so).
  size_t Read(size_t n) {
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c_, &raw) != REDIS_OK) throw std::runtime_error("connection lost");
      auto* r = static_cast<redisReply*>(raw);
      if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t e = 0; e < r->elements; ++e) done += Done(r->element[e]);
      } else {
        done += Done(r);
      }
      freeReplyObject(r);
    }
    return done;
  }

 private:
  static bool Done(const redisReply* r) {
    if (r->type == REDIS_REPLY_STATUS) return std::string_view(r->str, r->len) == "OK";
    if (r->type == REDIS_REPLY_INTEGER) return r->integer >= 0;
    // kClaimExclusive's {"granted", fence, waited} when it was asked how long others wait.
    return r->type == REDIS_REPLY_ARRAY && r->elements == 3;
  }

  redisContext* c_;
  int pid_ = 0;
};

enum class Call { kSetNx, kClaim, kReleaseTurn, kDelete };
enum class How { kEach, kBatch };

struct Shas {
  std::string claim, turn, del, batch;
};

// The KEYS and ARGV after the value of call i, as the agent sends them.
void Words(Call call, size_t i, std::vector<std::string>& keys, std::vector<std::string>& args) {
  const std::string key = Key(i);
  keys.clear();
  args.clear();
  switch (call) {
    case Call::kClaim:
      // A first attempt: no mark to drop, takes turns (waited 0), asks nobody how long they wait.
      keys = {key, key + "\x1freaders", key + "\x1fwriter-waiting"};
      args = {Value(i), kTtl, "1000", "mark:" + Value(i), "0", kAgent + ":", "0", "0"};
      break;
    case Call::kReleaseTurn:
      keys = {key};
      args = {Value(i), scripts::ReleaseChannel(key), "-1", "40", kAgent + ":"};
      break;
    case Call::kDelete:
      keys = {key};
      args = {Value(i), scripts::ReleaseChannel(key)};
      break;
    case Call::kSetNx:
      break;
  }
}

size_t IndexOf(Call call) {
  return call == Call::kClaim ? kClaimIndex : call == Call::kReleaseTurn ? kTurnIndex : kDeleteIndex;
}
const std::string& ShaOf(const Shas& s, Call call) {
  return call == Call::kClaim ? s.claim : call == Call::kReleaseTurn ? s.turn : s.del;
}

// Sends calls [0, calls) of `call` in groups of n; the master's ns per call.
double Phase(Master& m, const Shas& shas, Call call, How how, size_t calls, size_t n) {
  std::vector<std::string> keys, args;
  size_t done = 0;
  const double before = m.RunNs();
  for (size_t start = 0; start < calls; start += n) {
    const size_t end = std::min(calls, start + n);
    if (how == How::kBatch && call != Call::kSetNx) {
      ScriptBatch batch;
      for (size_t i = start; i < end; ++i) {
        Words(call, i, keys, args);
        std::vector<std::string_view> k(keys.begin(), keys.end()), a(args.begin(), args.end());
        batch.Add(IndexOf(call), k, a);
      }
      m.AppendRaw(batch.Command("EVALSHA", batch.size() == 1 ? ShaOf(shas, call) : shas.batch));
      done += m.Read(1);
      continue;
    }
    for (size_t i = start; i < end; ++i) {
      if (call == Call::kSetNx) {
        m.Append({"SET", Key(i), Value(i), "NX", "PX", kTtl});
        continue;
      }
      Words(call, i, keys, args);
      std::vector<std::string> w = {"EVALSHA", ShaOf(shas, call), std::to_string(keys.size())};
      w.insert(w.end(), keys.begin(), keys.end());
      w.insert(w.end(), args.begin(), args.end());
      m.Append(w);
    }
    done += m.Read(end - start);
  }
  const double ns = m.RunNs() - before;
  if (done != calls) {
    throw std::runtime_error("only " + std::to_string(done) + " of " + std::to_string(calls) +
                             " calls did what they asked");
  }
  return ns / static_cast<double>(calls);
}

int Main(int argc, char** argv) {
  std::string master = "127.0.0.1:6379";
  size_t calls = 100'000;
  std::vector<size_t> sizes = {1, 8, 32, 64};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--master") {
      master = value;
    } else if (flag == "--calls") {
      calls = std::stoul(value);
    } else if (flag == "--sizes") {
      sizes.clear();
      std::stringstream in(value);
      for (std::string s; std::getline(in, s, ',');) sizes.push_back(std::stoul(s));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 64;
    }
  }
  const size_t colon = master.rfind(':');
  Master m(master.substr(0, colon), std::stoi(master.substr(colon + 1)));
  const std::vector<const char*> bodies = AgentBodies();
  Shas shas{m.Load(scripts::kClaimExclusive), m.Load(scripts::kReleaseTurn),
            m.Load(scripts::kDeleteIfHeld), m.Load(BatchScriptBody(bodies))};

  struct Pair {
    Call acquire;
    How acquire_how;
    Call release;
    How release_how;
  };
  // Every acquire way and every release way, each measured once per size.
  const std::array<Pair, 4> pairs = {{{Call::kSetNx, How::kEach, Call::kReleaseTurn, How::kEach},
                                      {Call::kClaim, How::kEach, Call::kReleaseTurn, How::kBatch},
                                      {Call::kClaim, How::kBatch, Call::kDelete, How::kEach},
                                      {Call::kSetNx, How::kEach, Call::kDelete, How::kBatch}}};
  const auto name = [](Call c, How h) {
    const char* call = c == Call::kSetNx         ? "SET NX PX"
                       : c == Call::kClaim       ? "kClaimExclusive"
                       : c == Call::kReleaseTurn ? "kReleaseTurn"
                                                 : "kDeleteIfHeld";
    return std::string(call) + (c == Call::kSetNx ? "" : h == How::kEach ? ", EVALSHA each"
                                                                          : ", batched");
  };
  // results[row][size]
  std::vector<std::pair<std::string, std::vector<double>>> rows;
  const auto record = [&](const std::string& row, size_t s, double ns) {
    for (auto& [label, v] : rows) {
      if (label == row) {
        v[s] = ns;
        return;
      }
    }
    rows.emplace_back(row, std::vector<double>(sizes.size(), 0));
    rows.back().second[s] = ns;
  };
  for (size_t s = 0; s < sizes.size(); ++s) {
    for (const Pair& p : pairs) {
      m.Text("FLUSHALL");
      record("acquire: " + name(p.acquire, p.acquire_how), s,
             Phase(m, shas, p.acquire, p.acquire_how, calls, sizes[s]));
      record("release: " + name(p.release, p.release_how), s,
             Phase(m, shas, p.release, p.release_how, calls, sizes[s]));
    }
  }
  std::printf("A master's run time per call (%zu calls per cell; N calls per group)\n\n| call, sent as | ", calls);
  for (size_t n : sizes) std::printf("N = %zu | ", n);
  std::printf("\n|---|");
  for (size_t i = 0; i < sizes.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const auto& [row, v] : rows) {
    std::printf("| %s |", row.c_str());
    for (double ns : v) std::printf(" %.2f µs |", ns / 1000.0);
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace lw::bench

int main(int argc, char** argv) {
  try {
    return lw::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lw_bench_master_cost: %s\n", e.what());
    return 1;
  }
}
