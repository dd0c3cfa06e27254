#pragma once
// FakeNode: a scripted, in-memory Redis master for engine unit tests.
//
// It keeps key -> (token, expiry) and applies SET NX PX / compare-and-delete /
// compare-and-pexpire with Redis semantics at the moment it answers (as if the command
// reached the master then). Commands are answered strictly in the order they were sent, like
// one pipelined connection, and never synchronously: at the earliest from a zero-delay timer
// on the next loop turn. Per node the test chooses how new commands are answered:
//   Immediate() - on the next loop turn;
//   Delay(ms)   - ms after they were sent;
//   Hold()      - not until the test calls ReleaseHeld() (a stopped master; late replies);
//   Fail()      - Reply::kUnavailable on the next loop turn, without touching the data.
// Answers arrive in the loop's timer phase; after ThroughPoll(), in its poll phase (through a
// uv_async_t), as a real socket's do.
// Every command is recorded (op, key, token, ttl, send time, global sequence number, and the
// reply once delivered) so tests can assert on the traffic.
//
// Teardown: destroy whatever owns the handlers (engine, Rounds) first, then call Close() so
// that nothing pending is ever delivered, then run the loop until its handles are closed.

#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redis/node.h"
#include "redis/scripts.h"

namespace lw::fake {

class FakeNode : public Node {
 public:
  using Clock = std::chrono::steady_clock;

  // An exclusive acquire's script (kClaimExclusive) is recorded as kSet (or kSetReadFence when
  // fenced) and answered as the script does (integer 0 / the counter, nil, or {'readers'} with
  // the writer-waiting mark left); a kReleasePart as kDelete (that also drops its second key
  // where it holds the mark or record given). The other kind scripts (shared holds, permits,
  // their extends and releases, an election's phase 2 and record read) are kKindScript, answered as
  // redis/kind_scripts.h does, over strings and readers sets with expiries; others
  // kUnavailable. Command::script, keys and args keep what a script was sent.
  enum class Op { kSet, kDelete, kExtend, kSetReadFence, kRaiseFence, kKindScript };

  struct Command {
    Op op;
    std::string key;
    std::string token;
    int64_t ttl_ms = 0;  // kRaiseFence: the fence
    std::string fence_key;
    Clock::time_point sent;
    uint64_t seq = 0;            // global send order across all nodes sharing the counter
    std::optional<Reply> reply;  // set once the reply was delivered
    std::optional<Clock::time_point> replied;
    scripts::KindScript script = scripts::KindScript::kCount;  // kind scripts only
    std::vector<std::string> keys, args;  // args[0]: the value
    bool native = false;  // kSet sent as SET NX PX (Node::SetIfAbsent), not as the script
  };

  FakeNode(uv_loop_t* loop, int index, uint64_t* seq_counter)
      : index_(index), seq_counter_(seq_counter), timer_(new uv_timer_t) {
    uv_timer_init(loop, timer_);
    timer_->data = this;
  }
  ~FakeNode() override { Close(); }
  FakeNode(const FakeNode&) = delete;
  FakeNode& operator=(const FakeNode&) = delete;

  // ---- scripting ----
  void Immediate() { Delay(0); }
  void Delay(int64_t ms) {
    mode_ = Mode::kDelay;
    delay_ms_ = ms;
  }
  void Hold() { mode_ = Mode::kHold; }
  // Restart quarantine as the engine sees it (votes_count()).
  void Quarantine(bool on) { quarantined_ = on; }
  void Fail() { mode_ = Mode::kFail; }
  void ThroughPoll() {
    if (timer_ == nullptr || async_ != nullptr) return;
    async_ = new uv_async_t;
    uv_async_init(timer_->loop, async_, [](uv_async_t* a) {
      static_cast<FakeNode*>(a->data)->Deliver();
    });
    async_->data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(async_));
  }

  // Lets every held command be answered (in order, from the loop, on its next turn).
  void ReleaseHeld() {
    const auto now = Clock::now();
    for (auto& p : pending_) {
      if (p.held) {
        p.held = false;
        p.ready_at = now;
      }
    }
    Arm();
  }

  // Drops everything pending without answering and closes the timer. Idempotent.
  void Close() {
    pending_.clear();
    if (timer_ == nullptr) return;
    uv_timer_stop(timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(timer_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    timer_ = nullptr;
    if (async_ != nullptr) {
      uv_close(reinterpret_cast<uv_handle_t*>(async_),
               [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
      async_ = nullptr;
    }
  }

  // ---- data ----
  void Put(const std::string& key, const std::string& token, int64_t ttl_ms) {
    data_[key] = Entry{token, Clock::now() + std::chrono::milliseconds(ttl_ms)};
  }
  void Erase(const std::string& key) { data_.erase(key); }
  // Fence counters (no expiry); a master that lost its data is Forget()-ed.
  void SetCounter(const std::string& key, int64_t value) { counters_[key] = value; }
  std::optional<int64_t> Counter(const std::string& key) const {
    auto it = counters_.find(key);
    return it == counters_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  void Forget() {
    data_.clear();
    counters_.clear();
    sets_.clear();
  }
  // The token holding key now, if any (expired keys do not count).
  std::optional<std::string> Holder(const std::string& key) const {
    auto it = data_.find(key);
    if (it == data_.end() || it->second.expiry <= Clock::now()) return std::nullopt;
    return it->second.token;
  }

  // ---- traffic ----
  const std::vector<Command>& log() const { return log_; }
  size_t pending() const { return pending_.size(); }
  int index() const { return index_; }
  size_t Count(Op op) const {
    return static_cast<size_t>(
        std::count_if(log_.begin(), log_.end(), [op](const Command& c) { return c.op == op; }));
  }
  size_t Count(scripts::KindScript script) const {
    return static_cast<size_t>(std::count_if(log_.begin(), log_.end(), [script](const Command& c) {
      return c.op == Op::kKindScript && c.script == script;
    }));
  }
  std::vector<Command> Commands(Op op) const {
    std::vector<Command> out;
    for (const auto& c : log_) {
      if (c.op == op) out.push_back(c);
    }
    return out;
  }

  // ---- Node ----
  void DeleteIfHeld(const std::string& key, const std::string& token,
                    ReplyHandler handler) override {
    Enqueue(Op::kDelete, key, token, 0, std::move(handler));
  }
  void ExtendIfHeld(const std::string& key, const std::string& token, int64_t ttl_ms,
                    ReplyHandler handler) override {
    Enqueue(Op::kExtend, key, token, ttl_ms, std::move(handler));
  }
  void RaiseFenceIfHeld(const std::string& key, const std::string& fence_key,
                        const std::string& token, int64_t fence, ReplyHandler handler) override {
    Enqueue(Op::kRaiseFence, key, token, fence, std::move(handler), fence_key);
  }
  // Recorded as kSet with `native` set; answered OK or nil (it knows nothing of readers' marks).
  void SetIfAbsent(const std::string& key, std::string_view value, int64_t ttl_ms,
                   ReplyHandler handler) override {
    Enqueue(Op::kSet, key, std::string(value), ttl_ms, std::move(handler));
    log_.back().native = true;
  }
  void RunKindScript(scripts::KindScript script, std::span<const std::string> keys,
                     std::string_view value, std::span<const std::string> rest,
                     ReplyHandler handler) override {
    std::vector<std::string> args = {std::string(value)};
    args.insert(args.end(), rest.begin(), rest.end());
    std::vector<std::string> key_list(keys.begin(), keys.end());
    if (script == scripts::KindScript::kClaimExclusive) {
      // KEYS: P R, readers, writer-waiting, [fence counter]. Turns are not modelled: nobody
      // else ever waits here.
      const bool fenced = keys.size() > 3;
      Enqueue(fenced ? Op::kSetReadFence : Op::kSet, keys[0], args.at(0),
              std::stoll(args.at(1)), std::move(handler), fenced ? keys[3] : std::string());
    } else if (script == scripts::KindScript::kReleasePart ||
               script == scripts::KindScript::kReleaseTurn) {
      Enqueue(Op::kDelete, keys[0], args.at(0), 0, std::move(handler));
    } else {
      Enqueue(Op::kKindScript, keys[0], args.at(0), 0, std::move(handler));
    }
    log_.back().script = script;
    log_.back().keys = std::move(key_list);
    log_.back().args = std::move(args);
  }
  // The live members of a readers set (expired ones dropped).
  size_t Readers(const std::string& key) {
    auto it = sets_.find(key);
    if (it == sets_.end()) return 0;
    std::erase_if(it->second, [now = Clock::now()](const auto& m) { return m.second <= now; });
    return it->second.size();
  }
  bool votes_count() const override { return !quarantined_; }
  NodeStatus status() const override {
    NodeStatus s;
    s.addr = "fake-" + std::to_string(index_) + ":6379";
    s.up = mode_ != Mode::kFail;
    return s;
  }

 private:
  enum class Mode { kDelay, kHold, kFail };
  struct Entry {
    std::string token;
    Clock::time_point expiry;
  };
  struct Pending {
    size_t log_index;
    ReplyHandler handler;
    bool held;
    bool fail;
    Clock::time_point ready_at;
  };

  void Enqueue(Op op, const std::string& key, const std::string& token, int64_t ttl_ms,
               ReplyHandler handler, const std::string& fence_key = {}) {
    const auto now = Clock::now();
    log_.push_back(Command{op, key, token, ttl_ms, fence_key, now, ++*seq_counter_, std::nullopt,
                           std::nullopt, scripts::KindScript::kCount, {}, {}});
    if (timer_ == nullptr) return;  // closed: never answers
    Pending p{log_.size() - 1, std::move(handler), mode_ == Mode::kHold, mode_ == Mode::kFail,
              now + std::chrono::milliseconds(mode_ == Mode::kDelay ? delay_ms_ : 0)};
    pending_.push_back(std::move(p));
    Arm();
  }

  // Arms the timer for the front of the queue (answers are delivered in send order).
  void Arm() {
    if (timer_ == nullptr) return;
    uv_timer_stop(timer_);
    if (pending_.empty() || pending_.front().held) return;
    const auto wait = pending_.front().ready_at - Clock::now();
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
    if (async_ != nullptr && ms <= 0) {
      uv_async_send(async_);
      return;
    }
    uv_update_time(timer_->loop);
    uv_timer_start(
        timer_,
        [](uv_timer_t* t) {
          auto* self = static_cast<FakeNode*>(t->data);
          if (self->async_ != nullptr) {
            uv_async_send(self->async_);
          } else {
            self->Deliver();
          }
        },
        ms < 0 ? 0 : static_cast<uint64_t>(ms), 0);
  }

  void Deliver() {
    const auto now = Clock::now();
    // Only what was queued before this turn: commands sent from the handlers wait a turn.
    size_t budget = pending_.size();
    while (budget-- > 0 && !pending_.empty() && !pending_.front().held &&
           pending_.front().ready_at <= now) {
      Pending p = std::move(pending_.front());
      pending_.pop_front();
      Reply r = p.fail ? Unavailable() : Apply(log_[p.log_index], now);
      log_[p.log_index].reply = r;
      log_[p.log_index].replied = now;
      p.handler(r);
      if (timer_ == nullptr) return;  // closed from inside the handler
    }
    Arm();
  }

  static Reply Unavailable() {
    Reply r;
    r.kind = Reply::Kind::kUnavailable;
    r.text = "fake master unavailable";
    return r;
  }

  static Reply Int(int64_t v) {
    Reply r;
    r.kind = Reply::Kind::kInteger;
    r.integer = v;
    return r;
  }
  static Reply Array(std::vector<std::string> texts, std::vector<int64_t> numbers = {}) {
    Reply r;
    r.kind = Reply::Kind::kArray;
    for (auto& t : texts) {
      Reply e;
      e.kind = Reply::Kind::kString;
      e.text = std::move(t);
      r.elements.push_back(std::move(e));
    }
    for (int64_t n : numbers) r.elements.push_back(Int(n));
    return r;
  }
  // The live entry at key, or null (an expired one is dropped).
  Entry* Live(const std::string& key, Clock::time_point now) {
    auto it = data_.find(key);
    if (it == data_.end()) return nullptr;
    if (it->second.expiry <= now) {
      data_.erase(it);
      return nullptr;
    }
    return &it->second;
  }
  void SetAtLeast(const std::string& key, const std::string& value, Clock::time_point until,
                  Clock::time_point now) {
    Entry* e = Live(key, now);
    if (e == nullptr) {
      data_[key] = Entry{value, until};
    } else if (e->expiry < until) {
      e->expiry = until;
    }
  }

  // The kind scripts the fake models (Op::kKindScript), as redis/kind_scripts.h answers them.
  Reply ApplyKindScript(const Command& c, Clock::time_point now) {
    const auto& k = c.keys;
    const auto& a = c.args;
    switch (c.script) {
      case scripts::KindScript::kClaimShared: {
        if (const Entry* m = Live(k[0], now)) {
          return m->token.starts_with("lockwarden:semaphore:") ? Array({"kind", m->token})
                                                               : Array({"writer"});
        }
        if (Live(k[2], now)) return Array({"writer-waiting"});
        sets_[k[1]][a[0]] = now + std::chrono::milliseconds(std::stoll(a[1]));
        return Int(k.size() > 3 ? Counter(k[3]).value_or(0) : 0);
      }
      case scripts::KindScript::kClaimPermit: {
        const Entry* m = Live(k[0], now);
        if (m != nullptr && m->token != a[2]) return Array({"kind", m->token});
        if (Readers(k[2]) > 0) return Array({"kind", "readers"});
        if (Live(k[1], now)) {
          const int64_t n = std::stoll(a[3]), start = std::stoll(a[4]);
          std::vector<int64_t> free;
          for (int64_t i = 1; i < n && free.size() < 8; ++i) {
            const int64_t j = (start + i) % n;
            if (!Live(a[5] + std::to_string(j), now)) free.push_back(j);
          }
          return Array({"taken"}, free);
        }
        const auto until = now + std::chrono::milliseconds(std::stoll(a[1]));
        data_[k[1]] = Entry{a[0], until};
        SetAtLeast(k[0], a[2], until, now);
        const int64_t fence = k.size() > 3 ? Counter(k[3]).value_or(0) : 0;
        if (a.size() > 9 && a[9] == "1") return Array({"granted"}, {fence, -1});
        return Int(fence);
      }
      case scripts::KindScript::kExtendShared: {
        auto set = sets_.find(k[0]);
        if (Readers(k[0]) == 0 || !set->second.contains(a[0])) return Int(0);
        set->second[a[0]] = now + std::chrono::milliseconds(std::stoll(a[1]));
        return Int(1);
      }
      case scripts::KindScript::kExtendPermit: {
        Entry* e = Live(k[1], now);
        if (e == nullptr || e->token != a[0]) return Int(0);
        e->expiry = now + std::chrono::milliseconds(std::stoll(a[1]));
        if (Entry* first = Live(k[0], now); first != nullptr && first->expiry < e->expiry) {
          first->expiry = e->expiry;
        }
        return Int(1);
      }
      case scripts::KindScript::kReleaseShared: {
        Readers(k[0]);
        auto set = sets_.find(k[0]);
        return Int(set != sets_.end() && set->second.erase(a[0]) > 0 ? 1 : 0);
      }
      case scripts::KindScript::kFenceRecord: {
        const Entry* e = Live(k[0], now);
        if (e == nullptr || e->token != a[0]) return Int(0);
        if (Counter(k[1]).value_or(0) >= std::stoll(a[1])) return Int(-1);
        counters_[k[1]] = std::stoll(a[1]);
        data_[k[2]] = Entry{a[2], e->expiry};
        return Int(1);
      }
      case scripts::KindScript::kReadRecord: {
        const Entry* record = Live(k[1], now);
        const Entry* holder = Live(k[0], now);
        Reply r;
        r.kind = Reply::Kind::kNil;
        if (record == nullptr || holder == nullptr ||
            !record->token.starts_with(holder->token + '\x1f')) {
          return r;
        }
        r.kind = Reply::Kind::kString;
        r.text = record->token.substr(holder->token.size() + 1);
        return r;
      }
      case scripts::KindScript::kLeaveQueue:
        return Int(1);
      case scripts::KindScript::kTakeLease: {  // any agent's value for the same token
        const Entry* e = Live(k[0], now);
        const std::string token = a[0].substr(a[0].rfind(':') + 1);  // npos + 1 == 0
        if (e == nullptr || (e->token != a[0] && !e->token.ends_with(":" + token))) return Int(0);
        data_[k[0]] = Entry{a[0], now + std::chrono::milliseconds(std::stoll(a[1]))};
        return Int(1);
      }
      case scripts::KindScript::kQueueHead: {  // nobody else ever waits here
        Reply nil;
        nil.kind = Reply::Kind::kNil;
        return nil;
      }
      default:
        return Unavailable();
    }
  }

  Reply Apply(const Command& c, Clock::time_point now) {
    if (c.op == Op::kKindScript) return ApplyKindScript(c, now);
    if ((c.op == Op::kSet || c.op == Op::kSetReadFence) && c.keys.size() >= 3 &&
        Readers(c.keys[1]) > 0) {
      // Readers hold it: the exclusive claim leaves its mark (if none or its own) and is refused.
      const Entry* w = Live(c.keys[2], now);
      const std::string& mark = c.args.at(3);
      if (!mark.empty() && (w == nullptr || w->token == mark)) {
        data_[c.keys[2]] = Entry{mark, now + std::chrono::milliseconds(std::stoll(c.args.at(2)))};
      }
      return Array({"readers"});
    }
    // The mark (a writer-waiting mark, an election's record) a release drops where it is still
    // the one named: kReleasePart's second key and third argument, kReleaseTurn's third and
    // sixth.
    const bool turn = c.script == scripts::KindScript::kReleaseTurn;
    const size_t mark_key = turn ? 2 : 1, mark_arg = turn ? 5 : 2;
    if (c.op == Op::kDelete && c.keys.size() > mark_key && c.args.size() > mark_arg &&
        !c.args[mark_arg].empty()) {
      if (const Entry* m = Live(c.keys[mark_key], now); m && m->token == c.args[mark_arg]) {
        data_.erase(c.keys[mark_key]);
      }
    }
    auto it = data_.find(c.key);
    if (it != data_.end() && it->second.expiry <= now) {
      data_.erase(it);
      it = data_.end();
    }
    Reply r;
    switch (c.op) {
      case Op::kSet:
      case Op::kSetReadFence:
        if (it != data_.end()) {
          r.kind = Reply::Kind::kNil;
        } else if (c.op == Op::kSet && c.native) {
          data_[c.key] = Entry{c.token, now + std::chrono::milliseconds(c.ttl_ms)};
          r.kind = Reply::Kind::kStatus;
          r.text = "OK";
        } else if (c.op == Op::kSet) {
          data_[c.key] = Entry{c.token, now + std::chrono::milliseconds(c.ttl_ms)};
          r.kind = Reply::Kind::kInteger;
          r.integer = 0;
        } else {
          data_[c.key] = Entry{c.token, now + std::chrono::milliseconds(c.ttl_ms)};
          r.kind = Reply::Kind::kInteger;
          r.integer = Counter(c.fence_key).value_or(0);
        }
        break;
      case Op::kRaiseFence:
        r.kind = Reply::Kind::kInteger;
        r.integer = 0;
        if (it != data_.end() && it->second.token == c.token) {
          if (Counter(c.fence_key).value_or(0) >= c.ttl_ms) {
            r.integer = -1;
          } else {
            counters_[c.fence_key] = c.ttl_ms;
            r.integer = 1;
          }
        }
        break;
      case Op::kDelete:
        r.kind = Reply::Kind::kInteger;
        r.integer = 0;
        if (it != data_.end() && it->second.token == c.token) {
          data_.erase(it);
          r.integer = 1;
        }
        break;
      case Op::kExtend:
        r.kind = Reply::Kind::kInteger;
        r.integer = 0;
        if (it != data_.end() && it->second.token == c.token) {
          it->second.expiry = now + std::chrono::milliseconds(c.ttl_ms);
          r.integer = 1;
        }
        break;
      case Op::kKindScript:
        break;  // answered above
    }
    if ((c.op == Op::kSet || c.op == Op::kSetReadFence) && r.kind == Reply::Kind::kInteger &&
        c.args.size() >= 5 && c.args[4] != "0") {
      // Taken: its own mark, if an earlier attempt left it, goes.
      if (const Entry* w = Live(c.keys[2], now); w != nullptr && w->token == c.args[3]) {
        data_.erase(c.keys[2]);
      }
    }
    if (r.kind == Reply::Kind::kInteger && c.script == scripts::KindScript::kClaimExclusive &&
        c.args.size() > 7 && c.args[7] == "1") {
      return Array({"granted"}, {r.integer, -1});  // asked how long others wait: nobody does
    }
    return r;
  }

  int index_;
  uint64_t* seq_counter_;
  uv_timer_t* timer_;
  uv_async_t* async_ = nullptr;  // ThroughPoll: answers are delivered from its callback
  Mode mode_ = Mode::kDelay;
  int64_t delay_ms_ = 0;
  std::deque<Pending> pending_;
  std::vector<Command> log_;
  std::unordered_map<std::string, Entry> data_;
  std::unordered_map<std::string, int64_t> counters_;
  // Readers sets: member -> its expiry.
  std::unordered_map<std::string, std::map<std::string, Clock::time_point>> sets_;
  bool quarantined_ = false;
};

}  // namespace lw::fake
