#pragma once
// What the engine's unit tests share: a real libuv loop with five scripted masters
// (fake_node.h), the LockEngine fixture and the records of what left the engine.
//
// Assertions are on what leaves the engine (callbacks, events, stats, HeldBy) and on the
// commands the fake masters received, never on engine internals. Ordering and counts are
// preferred; a time is asserted only as a lower bound the engine guarantees (a timer never
// fires early) or as a relation to a timer with a wide gap (e.g. "ended long before the 10 s
// node timeout could have ended it"), so that a loaded 2-core box or a sanitizer build (2-20x
// slower) changes how long a test takes, never its outcome.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error_code.h"
#include "locking/engine_events.h"
#include "locking/engine_stats.h"
#include "locking/lock_engine.h"
#include "fake_node.h"
#include "locking/rounds.h"
#include "redis/node.h"

namespace lw::engine_test {


using fake::FakeNode;
using Op = FakeNode::Op;

constexpr int kNodes = 5;

inline int64_t MsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

inline bool IsHexToken(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

inline std::string Key(const std::string& resource) { return "lock:" + resource; }

// A claim's yes: the fence read (an integer), or {"granted", fence, waited} when asked.
inline bool IsClaimed(const Reply& r) {
  return r.kind == Reply::Kind::kInteger ||
         (r.kind == Reply::Kind::kArray && !r.elements.empty() && r.elements[0].text == "granted");
}

inline EngineOptions Options(int64_t node_timeout_ms = 50, int64_t retry_delay_ms = 20,
                      int64_t retry_jitter_ms = 10) {
  EngineOptions o;
  o.node_timeout_ms = node_timeout_ms;
  o.retry_delay_ms = retry_delay_ms;
  o.retry_jitter_ms = retry_jitter_ms;
  // Local hand-off after a grant that heard nobody waiting elsewhere does not depend on how
  // fast the test runs (the window is tested in failure_text_test.cc).
  o.handoff_window_ms = 3'600'000;
  return o;
}

// Options of an engine whose holds do not take turns with other agents: what a hand-off does
// to the key, the lease and the validity, apart from the turns rule (tested on its own).
inline EngineOptions LocalFirst() {
  EngineOptions o = Options();
  o.local_first = true;
  return o;
}

struct AcquireRecord {
  SessionId session = 0;
  int calls = 0;
  std::optional<std::variant<Grant, Failure>> result;
  Clock::time_point at;

  bool granted() const { return result && std::holds_alternative<Grant>(*result); }
  const Grant& grant() const { return std::get<Grant>(*result); }
  bool failed(ErrorCode code) const {
    return result && std::holds_alternative<Failure>(*result) &&
           std::get<Failure>(*result).code == code;
  }
  const Failure& failure() const { return std::get<Failure>(*result); }
  std::string Describe() const {
    if (!result) return "no result";
    if (granted()) return "granted " + grant().token;
    return "failed " + std::string(ErrorCodeName(failure().code)) + ": " + failure().message;
  }
};

struct ReleaseRecord {
  int calls = 0;
  std::optional<Failure> failure;
};

struct ExtendRecord {
  int calls = 0;
  std::optional<std::variant<Extension, Failure>> result;
  bool extended() const { return result && std::holds_alternative<Extension>(*result); }
  bool failed(ErrorCode code) const {
    return result && std::holds_alternative<Failure>(*result) &&
           std::get<Failure>(*result).code == code;
  }
};

struct LostEvent {
  SessionId session;
  std::string resource;
  std::string token;
  std::string reason;
  Clock::time_point at;
};

// What the engine reported through EngineEvents.
struct RecordingEvents final : EngineEvents {
  std::vector<LostEvent> lost;
  std::vector<std::pair<AcquireOutcome, int>> acquires;  // outcome, attempts
  std::vector<std::pair<SessionId, ErrorCode>> failed;
  void Lost(SessionId s, const std::string& resource, const std::string& token,
            std::string_view reason) override {
    lost.push_back({s, resource, token, std::string(reason), Clock::now()});
  }
  void AcquireFinished(AcquireOutcome o, std::chrono::nanoseconds, int attempts) override {
    acquires.emplace_back(o, attempts);
  }
  void AcquireFailed(SessionId s, std::string_view, ErrorCode code) override {
    failed.emplace_back(s, code);
  }
};

// The addresses FakeNode::status() gives, in node order.
inline std::vector<std::string> FakeAddresses() {
  std::vector<std::string> out;
  for (int i = 0; i < kNodes; ++i) out.push_back("fake-" + std::to_string(i) + ":6379");
  return out;
}

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    ASSERT_EQ(uv_timer_init(&loop_, &guard_), 0);
    ASSERT_EQ(uv_prepare_init(&loop_, &prepare_), 0);
    for (int i = 0; i < kNodes; ++i) {
      nodes_.push_back(std::make_unique<FakeNode>(&loop_, i, &seq_));
    }
  }

  void TearDown() override {
    DestroyUsers();
    for (auto& n : nodes_) n->Close();  // drop undelivered replies: their owners are gone
    uv_close(reinterpret_cast<uv_handle_t*>(&guard_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&prepare_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);  // until every handle finished closing
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a libuv handle was left open";
    nodes_.clear();
  }

  // Destroys whatever holds reply handlers (engine, Rounds) before the fakes close.
  virtual void DestroyUsers() = 0;

  std::vector<Node*> NodePtrs() {
    std::vector<Node*> out;
    for (auto& n : nodes_) out.push_back(n.get());
    return out;
  }

  // Drives the loop until pred() holds or timeout_ms passed. Returns pred().
  // UV_RUN_ONCE would block in poll until the next timer even after pred() came true, so the
  // loop runs in default mode and a prepare handle (run before every poll) stops it.
  bool RunUntil(const std::function<bool()>& pred, int64_t timeout_ms = 3000) {
    struct State {
      const std::function<bool()>* pred;
      bool timed_out = false;
    } state{&pred};
    guard_.data = &state;
    prepare_.data = &state;
    uv_update_time(&loop_);
    uv_timer_start(
        &guard_,
        [](uv_timer_t* t) {
          static_cast<State*>(t->data)->timed_out = true;
          uv_stop(t->loop);
        },
        static_cast<uint64_t>(timeout_ms), 0);
    uv_prepare_start(&prepare_, [](uv_prepare_t* p) {
      if ((*static_cast<State*>(p->data)->pred)()) uv_stop(p->loop);
    });
    while (!pred() && !state.timed_out) uv_run(&loop_, UV_RUN_DEFAULT);
    uv_prepare_stop(&prepare_);
    uv_timer_stop(&guard_);
    return pred();
  }
  void RunFor(int64_t ms) {
    RunUntil([] { return false; }, ms);
  }
  bool RunUntilQuiet(int64_t timeout_ms = 3000) {
    return RunUntil([this] { return TotalPending() == 0; }, timeout_ms);
  }

  size_t TotalPending() const {
    size_t n = 0;
    for (const auto& node : nodes_) n += node->pending();
    return n;
  }
  size_t TotalCommands() const {
    size_t n = 0;
    for (const auto& node : nodes_) n += node->log().size();
    return n;
  }
  FakeNode& node(int i) { return *nodes_[static_cast<size_t>(i)]; }

  uv_loop_t loop_{};
  uv_timer_t guard_{};
  uv_prepare_t prepare_{};
  uint64_t seq_ = 0;
  std::vector<std::unique_ptr<FakeNode>> nodes_;
};

// Position in n's log of the first command with op and token, or -1.
inline int IndexOf(const FakeNode& n, Op op, const std::string& token) {
  const auto& log = n.log();
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].op == op && log[i].token == token) return static_cast<int>(i);
  }
  return -1;
}

inline std::vector<std::string> Tokens(const FakeNode& n, Op op, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& c : n.log()) {
    if (c.op == op && c.key == key) out.push_back(c.token);
  }
  return out;
}

// ---- LockEngine -------------------------------------------------------------------------------

class LockEngineTest : public LoopTest {
 protected:
  void DestroyUsers() override { engine_.reset(); }

  // The engine counts into stats_ and reports to events_ unless options say otherwise.
  void MakeEngine(EngineOptions options = Options()) {
    if (options.events == nullptr) options.events = &events_;
    if (options.stats == nullptr) options.stats = &stats_;
    engine_ = std::make_unique<LockEngine>(&loop_, NodePtrs(), std::move(options));
  }

  AcquireRecord* Acquire(SessionId session, const std::string& resource, int64_t ttl_ms,
                         int64_t wait_ms, bool renew = false, bool fence = false,
                         AcquireKind kind = {}) {
    AcquireRecord* rec = &acquires_.emplace_back();
    rec->session = session;
    engine_->Acquire(
        session, resource, ttl_ms, wait_ms, renew,
        [this, rec](const std::variant<Grant, Failure>& r) {
          ++rec->calls;
          rec->result = r;
          rec->at = Clock::now();
          if (std::holds_alternative<Grant>(r)) grant_order_.push_back(rec->session);
        },
        fence, std::move(kind));
    return rec;
  }

  // A fenced acquire driven to its end; the grant's fence, or nullopt (the test failed).
  std::optional<int64_t> FencedGrant(SessionId session, const std::string& resource,
                                     std::string* token = nullptr) {
    AcquireRecord* rec = Acquire(session, resource, 1000, 0, false, /*fence=*/true);
    EXPECT_TRUE(RunUntil([rec] { return rec->calls > 0; }));
    EXPECT_TRUE(rec->granted()) << rec->Describe();
    if (!rec->granted()) return std::nullopt;
    EXPECT_TRUE(rec->grant().fence.has_value());
    if (token != nullptr) *token = rec->grant().token;
    return rec->grant().fence;
  }

  // Acquires and drives the loop until granted; fails the test otherwise.
  std::string Hold(SessionId session, const std::string& resource, int64_t ttl_ms = 10000) {
    AcquireRecord* rec = Acquire(session, resource, ttl_ms, 0);
    EXPECT_TRUE(RunUntil([rec] { return rec->calls > 0; }));
    EXPECT_TRUE(rec->granted()) << rec->Describe();
    return rec->granted() ? rec->grant().token : std::string();
  }

  ReleaseRecord* Release(SessionId session, const std::string& resource, const std::string& token) {
    ReleaseRecord* rec = &releases_.emplace_back();
    engine_->Release(session, resource, token, [rec](const std::optional<Failure>& f) {
      ++rec->calls;
      rec->failure = f;
    });
    return rec;
  }

  ExtendRecord* Extend(SessionId session, const std::string& resource, const std::string& token,
                       int64_t ttl_ms) {
    ExtendRecord* rec = &extends_.emplace_back();
    engine_->Extend(session, resource, token, ttl_ms,
                    [rec](const std::variant<Extension, Failure>& r) {
                      ++rec->calls;
                      rec->result = r;
                    });
    return rec;
  }

  // Every node received DeleteIfHeld(key, token), after its acquire (kSet) of that token if any.
  void ExpectDeletedEverywhere(const std::string& key, const std::string& token) {
    for (const auto& n : nodes_) {
      const int del = IndexOf(*n, Op::kDelete, token);
      ASSERT_GE(del, 0) << "node " << n->index() << " got no delete of " << token;
      EXPECT_EQ(n->log()[static_cast<size_t>(del)].key, key);
      EXPECT_LT(IndexOf(*n, Op::kSet, token), del) << "node " << n->index();
    }
  }

  std::unique_ptr<LockEngine> engine_;
  std::deque<AcquireRecord> acquires_;  // deque: records keep their address
  std::deque<ReleaseRecord> releases_;
  std::deque<ExtendRecord> extends_;
  std::vector<SessionId> grant_order_;
  stats::Registry registry_;
  EngineStats stats_{registry_, FakeAddresses()};
  RecordingEvents events_;
  std::vector<LostEvent>& lost_ = events_.lost;
};

}  // namespace lw::engine_test
