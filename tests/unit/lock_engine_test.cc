// Unit tests for src/locking: LockEngine and Rounds against scripted in-memory masters
// (tests/unit/fake_node.h) on a real libuv loop, one loop per test.
//
// Assertions are on what leaves the engine (callbacks, lost events, HeldBy) and on the
// commands the fake masters received, never on engine internals. Ordering and counts are
// preferred; a time is asserted only as a lower bound the engine guarantees (a timer never
// fires early) or as a relation to a timer with a wide gap (e.g. "ended long before the 10 s
// node timeout could have ended it"), so that a loaded 2-core box or a sanitizer build (2-20x
// slower) changes how long a test takes, never its outcome.

#include "locking/lock_engine.h"

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
#include "fake_node.h"
#include "locking/rounds.h"
#include "redis/node.h"

namespace lw {
namespace {

using fake::FakeNode;
using Op = FakeNode::Op;

constexpr int kNodes = 5;

int64_t MsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

bool IsHexToken(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string Key(const std::string& resource) { return "lock:" + resource; }

EngineOptions Options(int64_t node_timeout_ms = 50, int64_t retry_delay_ms = 20,
                      int64_t retry_jitter_ms = 10) {
  EngineOptions o;
  o.node_timeout_ms = node_timeout_ms;
  o.retry_delay_ms = retry_delay_ms;
  o.retry_jitter_ms = retry_jitter_ms;
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
int IndexOf(const FakeNode& n, Op op, const std::string& token) {
  const auto& log = n.log();
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].op == op && log[i].token == token) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> Tokens(const FakeNode& n, Op op, const std::string& key) {
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

  void MakeEngine(EngineOptions options = Options()) {
    engine_ = std::make_unique<LockEngine>(
        &loop_, NodePtrs(), std::move(options),
        [this](SessionId s, const std::string& resource, const std::string& token,
               std::string_view reason) {
          lost_.push_back({s, resource, token, std::string(reason), Clock::now()});
        });
  }

  AcquireRecord* Acquire(SessionId session, const std::string& resource, int64_t ttl_ms,
                         int64_t wait_ms, bool renew = false, bool fence = false) {
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
        fence);
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

  // Every node received DeleteIfHeld(key, token), after its SetIfAbsent of that token if any.
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
  std::vector<LostEvent> lost_;
};

// 1.
TEST_F(LockEngineTest, GrantsWithFiveHealthyMasters) {
  MakeEngine();
  // A 10 s ttl: the lock cannot expire (and be deleted) during the test, however slow the box.
  AcquireRecord* a = Acquire(1, "res", 10000, 0);
  EXPECT_EQ(a->calls, 0) << "the callback must never run inside Acquire";
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->granted()) << a->Describe();
  const Grant& g = a->grant();
  EXPECT_TRUE(IsHexToken(g.token)) << g.token;
  EXPECT_GT(g.validity_ms, 0);
  EXPECT_LE(g.validity_ms, 10000 - (100 + 2));  // ttl - (ttl * 0.01 + 2)
  EXPECT_GE(g.waited_ms, 0);
  for (const auto& n : nodes_) {
    ASSERT_EQ(n->log().size(), 1u) << "node " << n->index();
    const auto& c = n->log()[0];
    EXPECT_EQ(c.op, Op::kSet);
    EXPECT_EQ(c.key, Key("res"));
    EXPECT_EQ(c.token, g.token);
    EXPECT_EQ(c.ttl_ms, 10000);
    EXPECT_EQ(n->Holder(Key("res")), g.token);
  }
  auto held = engine_->HeldBy(1);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].resource, "res");
  EXPECT_EQ(held[0].token, g.token);
  EXPECT_FALSE(held[0].renew);
  EXPECT_LE(held[0].validity_ms, g.validity_ms);
  EXPECT_EQ(engine_->locks_held(), 1u);

  RunFor(30);
  EXPECT_EQ(a->calls, 1);
  EXPECT_EQ(TotalCommands(), 5u) << "nothing else may be sent for a granted lock";
}

// 2.
TEST_F(LockEngineTest, GrantsAtQuorumWithoutWaitingForSilentMasters) {
  // A 10 s node timeout: a grant that waited for the silent masters would take that long.
  MakeEngine(Options(/*node_timeout_ms=*/10000));
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  AcquireRecord* a = Acquire(1, "res", 30000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, 15000));
  ASSERT_TRUE(a->granted()) << a->Describe();
  EXPECT_LT(MsBetween(start, a->at), 5000) << "the grant must not wait for the node timeout";
  for (const auto& n : nodes_) {
    ASSERT_EQ(n->log().size(), 1u) << "node " << n->index();
    EXPECT_EQ(n->log()[0].token, a->grant().token);
  }
  EXPECT_EQ(engine_->HeldBy(1).size(), 1u);
}

// 3.
TEST_F(LockEngineTest, LateYesAfterNodeTimeoutNeverCounts) {
  MakeEngine(Options(/*node_timeout_ms=*/100));
  node(2).Hold();
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  EXPECT_NE(a->failure().message.find("2 of 5"), std::string::npos) << a->failure().message;
  EXPECT_GE(MsBetween(start, a->at), 95) << "the round ends at the node timeout";

  ASSERT_EQ(node(0).Commands(Op::kSet).size(), 1u);
  const std::string token = node(0).Commands(Op::kSet)[0].token;
  // The undo goes to all five, including the three that have not answered yet.
  ExpectDeletedEverywhere(Key("res"), token);

  // Now the stopped masters answer: a yes to the SET, then the queued DEL undoes it.
  for (int i = 2; i < 5; ++i) node(i).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  for (int i = 2; i < 5; ++i) {
    const auto sets = node(i).Commands(Op::kSet);
    ASSERT_EQ(sets.size(), 1u);
    ASSERT_TRUE(sets[0].reply.has_value());
    EXPECT_EQ(sets[0].reply->text, "OK") << "the late answer was a yes";
  }
  EXPECT_EQ(a->calls, 1);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 0u);
  for (const auto& n : nodes_) EXPECT_EQ(n->Holder(Key("res")), std::nullopt) << n->index();
}

// 3b. The same with answers that are slow rather than stopped.
TEST_F(LockEngineTest, DelayedYesAfterNodeTimeoutNeverCounts) {
  MakeEngine(Options(/*node_timeout_ms=*/60));
  for (int i = 2; i < 5; ++i) node(i).Delay(150);
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  const std::string token = node(0).Commands(Op::kSet).at(0).token;
  ExpectDeletedEverywhere(Key("res"), token);
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(a->calls, 1);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
  for (const auto& n : nodes_) EXPECT_EQ(n->Holder(Key("res")), std::nullopt) << n->index();
}

// 3c. Three masters down and two slow: the round ends on the third failure, before the live
// ones answer. The message must say masters were down, not read like a plain timeout.
TEST_F(LockEngineTest, NoQuorumWithMastersDownSaysTheyWereDown) {
  MakeEngine(Options(/*node_timeout_ms=*/200));
  for (int i = 0; i < 3; ++i) node(i).Fail();
  for (int i = 3; i < 5; ++i) node(i).Delay(50);
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  const std::string message = std::get<Failure>(*a->result).message;
  EXPECT_THAT(message, ::testing::HasSubstr("only 0 of 5 masters answered in time (quorum is 3)"));
  EXPECT_THAT(message, ::testing::HasSubstr("3 could not be asked or failed (down, unreachable or an error "
                                 "reply), which ended the round before the others answered"));
  ASSERT_TRUE(RunUntilQuiet());
}

// 4.
TEST_F(LockEngineTest, NonPositiveValidityIsNotGranted) {
  // ttl 100, drift 1 + 2 ms: answers after 99 ms leave at most 100 - 99 - 3 < 0.
  MakeEngine(Options(/*node_timeout_ms=*/150));
  for (auto& n : nodes_) n->Delay(99);
  AcquireRecord* a = Acquire(1, "res", 100, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_FALSE(a->granted()) << "all five said yes, but too late to be valid";
  ASSERT_TRUE(a->result.has_value());
  const std::string token = node(0).Commands(Op::kSet).at(0).token;
  ExpectDeletedEverywhere(Key("res"), token);
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(a->calls, 1);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 0u);
  EXPECT_TRUE(lost_.empty());
}

// 5.
TEST_F(LockEngineTest, ContendedLockRetriesWithFreshTokensUntilWaitEnds) {
  constexpr int64_t kRetryDelayMs = 20;
  MakeEngine(Options(/*node_timeout_ms=*/50, kRetryDelayMs, /*retry_jitter_ms=*/10));
  // Held by the other owner for far longer than the test.
  for (int i = 0; i < 3; ++i) node(i).Put(Key("res"), "other-owner", 600000);
  constexpr int64_t kWaitMs = 1000;
  const auto start = Clock::now();
  AcquireRecord* a = Acquire(1, "res", 5000, kWaitMs);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, 20000));
  ASSERT_TRUE(a->failed(ErrorCode::kTimeout)) << a->Describe();
  const int64_t elapsed = MsBetween(start, a->at);
  EXPECT_GE(elapsed, kWaitMs - 1) << "gave up before wait_ms";
  EXPECT_LT(elapsed, 10 * kWaitMs) << "did not give up at wait_ms";
  ASSERT_TRUE(RunUntilQuiet());  // let the last undo land
  RunFor(10);

  const auto tokens = Tokens(node(0), Op::kSet, Key("res"));
  EXPECT_GE(tokens.size(), 3u) << "several attempts within wait_ms";
  // An attempt starts at most once per retry delay (a timer never fires early), however long
  // the wait really took.
  EXPECT_LE(static_cast<int64_t>(tokens.size()), elapsed / kRetryDelayMs + 1)
      << "attempts must be spaced by the retry delay";
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size())
      << "each attempt uses a fresh token";
  for (const auto& t : tokens) EXPECT_TRUE(IsHexToken(t)) << t;
  for (const auto& n : nodes_) {
    EXPECT_EQ(Tokens(*n, Op::kSet, Key("res")), tokens) << "every attempt goes to every master";
    // One attempt at a time: SET t1, DEL t1, SET t2, DEL t2, ...
    const auto& log = n->log();
    ASSERT_EQ(log.size(), 2 * tokens.size()) << "node " << n->index();
    for (size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_EQ(log[2 * i].op, Op::kSet);
      EXPECT_EQ(log[2 * i].token, tokens[i]);
      EXPECT_EQ(log[2 * i].ttl_ms, 5000);
      EXPECT_EQ(log[2 * i + 1].op, Op::kDelete);
      EXPECT_EQ(log[2 * i + 1].token, tokens[i]) << "each attempt is undone with its own token";
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node(i).Holder(Key("res")), "other-owner");
  for (int i = 3; i < 5; ++i) EXPECT_EQ(node(i).Holder(Key("res")), std::nullopt);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
}

// 6.
TEST_F(LockEngineTest, TooFewMastersAnsweringIsNoQuorumNotTimeout) {
  MakeEngine();
  for (int i = 0; i < 3; ++i) node(i).Fail();
  AcquireRecord* once = Acquire(1, "a", 5000, 0);
  // Long enough for a retry (20-30 ms apart) even if the loop is held up now and then.
  AcquireRecord* retried = Acquire(2, "b", 5000, 1000);
  ASSERT_TRUE(RunUntil([&] { return once->calls > 0 && retried->calls > 0; }, 15000));
  for (AcquireRecord* a : {once, retried}) {
    ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
    // The count is what was tallied when the round was decided: the three failures may
    // arrive before the two yes votes, so anything from 0 to 2 is right.
    const std::string& msg = a->failure().message;
    EXPECT_TRUE(msg.find("0 of 5") != std::string::npos ||
                msg.find("1 of 5") != std::string::npos || msg.find("2 of 5") != std::string::npos)
        << msg;
    EXPECT_NE(msg.find("quorum is 3"), std::string::npos) << msg;
  }
  EXPECT_GE(Tokens(node(3), Op::kSet, Key("b")).size(), 2u) << "it retried within wait_ms";
  ExpectDeletedEverywhere(Key("a"), Tokens(node(3), Op::kSet, Key("a")).at(0));
  ASSERT_TRUE(RunUntilQuiet());
  for (int i = 3; i < 5; ++i) {
    EXPECT_EQ(node(i).Holder(Key("a")), std::nullopt);
    EXPECT_EQ(node(i).Holder(Key("b")), std::nullopt);
  }
}

// 7.
TEST_F(LockEngineTest, LocalWaitersAreServedInFifoOrder) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");
  AcquireRecord* a2 = Acquire(2, "res", 10000, 5000);
  AcquireRecord* a3 = Acquire(3, "res", 10000, 5000);
  AcquireRecord* a4 = Acquire(4, "res", 10000, 5000);
  RunFor(80);
  EXPECT_EQ(node(0).Count(Op::kSet), 1u) << "no waiter contends while a local session holds";
  EXPECT_EQ(a2->calls + a3->calls + a4->calls, 0);

  Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  RunFor(50);
  EXPECT_EQ(a3->calls + a4->calls, 0);

  Release(2, "res", a2->grant().token);
  ASSERT_TRUE(RunUntil([a3] { return a3->calls > 0; }));
  ASSERT_TRUE(a3->granted()) << a3->Describe();
  RunFor(20);
  EXPECT_EQ(a4->calls, 0);

  Release(3, "res", a3->grant().token);
  ASSERT_TRUE(RunUntil([a4] { return a4->calls > 0; }));
  ASSERT_TRUE(a4->granted()) << a4->Describe();
  EXPECT_EQ(grant_order_, (std::vector<SessionId>{1, 2, 3, 4}));
  // Same ttl, most of the validity left: each release handed the key on locally.
  EXPECT_EQ(node(0).Count(Op::kSet), 1u);
  EXPECT_EQ(node(0).Count(Op::kDelete), 0u);
  EXPECT_EQ(node(0).Holder(Key("res")), t1);
}

// A release with a local waiter next in line whose ttl matches hands the masters' key over as
// it is: no delete, no new SET, the waiter's validity is what was left of the holder's, and
// its own token is new. The key keeps the first token (the lease): extends and the final
// release use it, and the previous holder's token no longer releases anything.
TEST_F(LockEngineTest, ReleaseHandsTheKeyToTheNextLocalWaiterWithoutARoundTrip) {
  MakeEngine();
  const auto held_from = Clock::now();  // the holder's validity counts from after this
  AcquireRecord* a1 = Acquire(1, "res", 10000, 0);
  ASSERT_TRUE(RunUntil([a1] { return a1->calls > 0; }));
  ASSERT_TRUE(a1->granted()) << a1->Describe();
  const std::string t1 = a1->grant().token;
  const int64_t holder_validity = a1->grant().validity_ms;
  AcquireRecord* a2 = Acquire(2, "res", 10000, 5000);
  RunFor(20);
  const size_t before = node(0).log().size();
  ReleaseRecord* r = Release(1, "res", t1);
  EXPECT_EQ(r->calls, 0) << "the release's callback never runs inside Release";
  ASSERT_TRUE(RunUntil([&] { return r->calls > 0 && a2->calls > 0; }));
  EXPECT_EQ(r->failure, std::nullopt);
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  const std::string t2 = a2->grant().token;
  EXPECT_NE(t2, t1);
  // What was left of the holder's validity at the hand-off: all of it but the time since.
  EXPECT_GE(a2->grant().validity_ms, holder_validity - MsBetween(held_from, a2->at) - 1);
  EXPECT_LE(a2->grant().validity_ms, holder_validity + 1);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->log().size(), before) << "node " << n->index() << ": nothing sent";
    EXPECT_EQ(n->Holder(Key("res")), t1);
  }
  ASSERT_EQ(engine_->HeldBy(2).size(), 1u);
  EXPECT_EQ(engine_->HeldBy(2)[0].token, t2);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
  ReleaseRecord* stale = Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([&] { return stale->calls > 0; }));
  ASSERT_TRUE(stale->failure.has_value());
  EXPECT_EQ(stale->failure->code, ErrorCode::kNotHeld);

  ExtendRecord* e = Extend(2, "res", t2, 20000);
  ASSERT_TRUE(RunUntil([&] { return e->calls > 0; }));
  EXPECT_TRUE(e->extended()) << "extended with the lease";
  EXPECT_EQ(node(0).Commands(Op::kExtend).back().token, t1);

  // An extend in flight holds the hand-off back: the key's expiry may still change.
  AcquireRecord* a3 = Acquire(3, "res", 10000, 5000);
  RunFor(20);
  ExtendRecord* shorter = Extend(2, "res", t2, 2000);
  ReleaseRecord* last = Release(2, "res", t2);
  ASSERT_TRUE(RunUntil([&] { return last->calls > 0; }));
  EXPECT_EQ(last->failure, std::nullopt);
  ASSERT_TRUE(RunUntilQuiet());
  ASSERT_TRUE(a3->granted()) << a3->Describe();
  EXPECT_EQ(shorter->calls, 1);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Commands(Op::kDelete).back().token, t1) << "node " << n->index();
    EXPECT_EQ(n->Holder(Key("res")), a3->grant().token) << "node " << n->index();
  }
}

// Handing over locally needs the same ttl (the key was set for the holder's) and at least half
// of the waiter's ttl left; a fenced waiter needs a fence from the masters.
TEST_F(LockEngineTest, AHandOverGoesThroughTheMastersWhenTheKeyDoesNotFitTheWaiter) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");
  AcquireRecord* other_ttl = Acquire(2, "res", 20000, 5000);
  RunFor(20);
  Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([&] { return other_ttl->calls > 0; }));
  ASSERT_TRUE(other_ttl->granted());
  EXPECT_EQ(node(0).Count(Op::kSet), 2u);
  EXPECT_EQ(node(0).Holder(Key("res")), other_ttl->grant().token);

  AcquireRecord* fenced = Acquire(3, "res", 20000, 5000, /*renew=*/false, /*fence=*/true);
  RunFor(20);
  Release(2, "res", other_ttl->grant().token);
  ASSERT_TRUE(RunUntil([&] { return fenced->calls > 0; }));
  ASSERT_TRUE(fenced->granted()) << fenced->Describe();
  ASSERT_TRUE(fenced->grant().fence.has_value());
  EXPECT_EQ(node(0).Holder(Key("res")), fenced->grant().token);
}

// 7b.
TEST_F(LockEngineTest, OnlyTheHeadWaiterContendsOnRedis) {
  MakeEngine(Options(/*node_timeout_ms=*/50, /*retry_delay_ms=*/20, /*retry_jitter_ms=*/10));
  for (int i = 0; i < 3; ++i) node(i).Put(Key("res"), "other-owner", 60000);
  const auto start = Clock::now();
  AcquireRecord* a1 = Acquire(1, "res", 10000, 30000);
  AcquireRecord* a2 = Acquire(2, "res", 10000, 30000);
  AcquireRecord* a3 = Acquire(3, "res", 10000, 30000);
  RunFor(500);
  const int64_t elapsed = MsBetween(start, Clock::now());
  EXPECT_EQ(a1->calls + a2->calls + a3->calls, 0);
  const int64_t contended = static_cast<int64_t>(node(0).Count(Op::kSet));
  EXPECT_GE(contended, 2);
  // One contender starts an attempt at most every 20 ms (its retry timer never fires early);
  // three would start three times as many.
  EXPECT_LE(contended, elapsed / 20 + 1) << "one contender retrying every 20-30 ms, not three";
  for (const auto& n : nodes_) {
    // Strict SET/DEL alternation: never two attempts in flight.
    const auto& log = n->log();
    for (size_t i = 0; i + 1 < log.size(); i += 2) {
      EXPECT_EQ(log[i].op, Op::kSet);
      EXPECT_EQ(log[i + 1].op, Op::kDelete);
      EXPECT_EQ(log[i + 1].token, log[i].token);
    }
  }

  for (int i = 0; i < 3; ++i) node(i).Erase(Key("res"));  // the other owner lets go
  ASSERT_TRUE(RunUntil([a1] { return a1->calls > 0; }));
  ASSERT_TRUE(a1->granted()) << a1->Describe();
  EXPECT_EQ(Tokens(node(0), Op::kSet, Key("res")).back(), a1->grant().token);
  const size_t at_grant = node(0).Count(Op::kSet);
  RunFor(100);
  EXPECT_EQ(node(0).Count(Op::kSet), at_grant) << "waiters behind a local holder stay quiet";
  EXPECT_EQ(a2->calls + a3->calls, 0);

  Release(1, "res", a1->grant().token);
  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  Release(2, "res", a2->grant().token);
  ASSERT_TRUE(RunUntil([a3] { return a3->calls > 0; }));
  ASSERT_TRUE(a3->granted()) << a3->Describe();
  EXPECT_EQ(grant_order_, (std::vector<SessionId>{1, 2, 3}));
}

// 8.
TEST_F(LockEngineTest, LocalWaiterTimesOutWithoutRedisTraffic) {
  MakeEngine();
  // Held for 60 s: a waiter that did not give up at its wait_ms would wait for that.
  const std::string t1 = Hold(1, "res", 60000);
  ASSERT_FALSE(t1.empty());
  const auto start = Clock::now();
  AcquireRecord* head = Acquire(2, "res", 10000, 100);
  AcquireRecord* behind = Acquire(3, "res", 10000, 150);
  ASSERT_TRUE(RunUntil([&] { return head->calls > 0 && behind->calls > 0; }, 30000));
  for (AcquireRecord* a : {head, behind}) {
    ASSERT_TRUE(a->failed(ErrorCode::kTimeout)) << a->Describe();
    EXPECT_NE(a->failure().message.find("another session of this agent"), std::string::npos)
        << a->failure().message;
  }
  EXPECT_GE(MsBetween(start, head->at), 100 - 1);
  EXPECT_LT(MsBetween(start, head->at), 30000) << "at its wait_ms, long before the holder's end";
  EXPECT_GE(MsBetween(start, behind->at), 150 - 1);
  EXPECT_LT(MsBetween(start, behind->at), 30000) << "at its wait_ms, long before the holder's end";
  EXPECT_EQ(TotalCommands(), 5u) << "only session 1's SET was ever sent";
  ASSERT_EQ(engine_->HeldBy(1).size(), 1u);
  EXPECT_EQ(engine_->HeldBy(1)[0].token, t1);
}

// 9.
TEST_F(LockEngineTest, ReleaseDeletesEverywhereBeforeTheNextWaiterSets) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");
  // Another ttl: the key set for t1's cannot simply be handed over (see above).
  AcquireRecord* a2 = Acquire(2, "res", 20000, 5000);
  RunFor(20);
  ReleaseRecord* r = Release(1, "res", t1);
  EXPECT_EQ(r->calls, 0) << "the callback must never run inside Release";
  ASSERT_TRUE(RunUntil([&] { return r->calls > 0 && a2->calls > 0; }));
  EXPECT_EQ(r->failure, std::nullopt);
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  const std::string t2 = a2->grant().token;
  EXPECT_NE(t2, t1);
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) {
    const auto& log = n->log();
    ASSERT_EQ(log.size(), 3u) << "node " << n->index();
    EXPECT_EQ(log[0].op, Op::kSet);
    EXPECT_EQ(log[0].token, t1);
    EXPECT_EQ(log[1].op, Op::kDelete);
    EXPECT_EQ(log[1].token, t1);
    EXPECT_EQ(log[1].key, Key("res"));
    EXPECT_EQ(log[2].op, Op::kSet);
    EXPECT_EQ(log[2].token, t2);
    EXPECT_EQ(n->Holder(Key("res")), t2);
  }
  EXPECT_EQ(r->calls, 1);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
  ASSERT_EQ(engine_->HeldBy(2).size(), 1u);
  EXPECT_EQ(engine_->HeldBy(2)[0].token, t2);
}

// 10.
TEST_F(LockEngineTest, ReleaseWithWrongTokenOrSessionIsNotHeld) {
  MakeEngine();
  const std::string t1 = Hold(1, "res");
  ReleaseRecord* wrong_token = Release(1, "res", std::string(40, '0'));
  ReleaseRecord* wrong_session = Release(2, "res", t1);
  ReleaseRecord* wrong_resource = Release(1, "other", t1);
  EXPECT_EQ(wrong_token->calls + wrong_session->calls + wrong_resource->calls, 0);
  ASSERT_TRUE(RunUntil([&] {
    return wrong_token->calls > 0 && wrong_session->calls > 0 && wrong_resource->calls > 0;
  }));
  for (ReleaseRecord* r : {wrong_token, wrong_session, wrong_resource}) {
    ASSERT_TRUE(r->failure.has_value());
    EXPECT_EQ(r->failure->code, ErrorCode::kNotHeld);
    EXPECT_EQ(r->calls, 1);
  }
  RunFor(20);
  EXPECT_EQ(TotalCommands(), 5u) << "nothing may be sent for a refused release";
  ASSERT_EQ(engine_->HeldBy(1).size(), 1u);
  EXPECT_EQ(engine_->HeldBy(1)[0].token, t1);

  ReleaseRecord* ok = Release(1, "res", t1);
  ASSERT_TRUE(RunUntil([ok] { return ok->calls > 0; }));
  EXPECT_EQ(ok->failure, std::nullopt);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
}

// 11.
TEST_F(LockEngineTest, ExtendCountsOnlyWithQuorum) {
  MakeEngine();
  // A 10 s lock extended to 30 s: it cannot expire during the test however slow the box, and
  // a validity above 10 s can only come from the extension.
  const std::string t1 = Hold(1, "res", 10000);
  ExtendRecord* e = Extend(1, "res", t1, 30000);
  EXPECT_EQ(e->calls, 0) << "the callback must never run inside Extend";
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }));
  ASSERT_TRUE(e->extended());
  const int64_t validity = std::get<Extension>(*e->result).validity_ms;
  EXPECT_GT(validity, 10000);
  EXPECT_LE(validity, 30000 - (300 + 2));
  for (const auto& n : nodes_) {
    const auto ext = n->Commands(Op::kExtend);
    ASSERT_EQ(ext.size(), 1u) << "node " << n->index();
    EXPECT_EQ(ext[0].key, Key("res"));
    EXPECT_EQ(ext[0].token, t1);
    EXPECT_EQ(ext[0].ttl_ms, 30000);
  }
  ASSERT_EQ(engine_->HeldBy(1).size(), 1u);
  EXPECT_GT(engine_->HeldBy(1)[0].validity_ms, 10000) << "the new validity applies";

  // Two confirmations are not enough, whether the other three fail (after the two yes
  // votes came in) or never answer at all.
  for (int i = 2; i < 5; ++i) node(i).Fail();
  ExtendRecord* e2 = Extend(1, "res", t1, 5000);
  ASSERT_TRUE(RunUntil([e2] { return e2->calls > 0; }));
  EXPECT_TRUE(e2->failed(ErrorCode::kNoQuorum));
  for (int i = 2; i < 5; ++i) node(i).Hold();
  ExtendRecord* e3 = Extend(1, "res", t1, 5000);
  ASSERT_TRUE(RunUntil([e3] { return e3->calls > 0; }));
  EXPECT_TRUE(e3->failed(ErrorCode::kNoQuorum));
  EXPECT_EQ(node(0).Count(Op::kExtend), 3u);
  ASSERT_EQ(engine_->HeldBy(1).size(), 1u) << "a failed extension does not drop the lock";
  EXPECT_EQ(engine_->HeldBy(1)[0].token, t1);
  for (const auto& n : nodes_) EXPECT_EQ(n->Count(Op::kDelete), 0u) << n->index();

  ExtendRecord* bad = Extend(1, "res", std::string(40, 'f'), 5000);
  ExtendRecord* other_session = Extend(2, "res", t1, 5000);
  ASSERT_TRUE(RunUntil([&] { return bad->calls > 0 && other_session->calls > 0; }));
  EXPECT_TRUE(bad->failed(ErrorCode::kNotHeld));
  EXPECT_TRUE(other_session->failed(ErrorCode::kNotHeld));
  EXPECT_EQ(node(0).Count(Op::kExtend), 3u) << "a refused extension sends nothing";
  EXPECT_TRUE(lost_.empty());
}

// 11b. HeldBy must agree with the validity the grant announced: ValidityMs() is the time
// left *from the moment the answers arrived* (ttl - elapsed - drift), so the lock is valid
// until then + validity, i.e. started + ttl - drift.

TEST_F(LockEngineTest, HeldByValidityAgreesWithTheGrant) {
  // The masters take 1 s to answer: subtracting that twice would cost a whole second, against
  // the few ms (or, on a loaded box, tens of ms) between the grant and the read below.
  constexpr int64_t kAnswerMs = 1000;
  MakeEngine(Options(/*node_timeout_ms=*/4000));
  for (auto& n : nodes_) n->Delay(kAnswerMs);
  std::optional<int64_t> held_at_grant;
  AcquireRecord* a = Acquire(1, "res", 10000, 0);
  ASSERT_TRUE(RunUntil(
      [&] {
        if (a->calls > 0 && !held_at_grant && !engine_->HeldBy(1).empty()) {
          held_at_grant = engine_->HeldBy(1)[0].validity_ms;
        }
        return a->calls > 0;
      },
      15000));
  ASSERT_TRUE(a->granted()) << a->Describe();
  ASSERT_TRUE(held_at_grant.has_value());
  const int64_t granted = a->grant().validity_ms;
  EXPECT_LE(granted, 10000 - kAnswerMs - 102);
  // Read within a loop turn of the grant.
  EXPECT_GE(*held_at_grant, granted - kAnswerMs / 2)
      << "HeldBy reports " << *held_at_grant << " ms left right after a grant of " << granted
      << " ms: the acquisition time was subtracted twice";
}

// 11c. An extension that reaches quorum while the lock is still valid (by the validity the
// grant announced) must succeed and must not drop the lock.
TEST_F(LockEngineTest, ExtendWithinTheGrantedValiditySucceeds) {
  // The masters take 1 s to answer. The extension is sent so that its answers arrive 500 ms
  // before the granted validity ends; a deadline that subtracted the acquisition's 1 s twice
  // would have passed 500 ms before they arrive. Both margins dwarf a loaded box's hiccups.
  constexpr int64_t kAnswerMs = 1000;
  MakeEngine(Options(/*node_timeout_ms=*/4000));
  for (auto& n : nodes_) n->Delay(kAnswerMs);
  AcquireRecord* a = Acquire(1, "res", 5000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, 15000));
  ASSERT_TRUE(a->granted()) << a->Describe();
  const int64_t validity = a->grant().validity_ms;  // about 5000 - 1000 - 52
  const int64_t send_in = validity - kAnswerMs - kAnswerMs / 2 - MsBetween(a->at, Clock::now());
  RunFor(std::max<int64_t>(0, send_in));
  ExtendRecord* e = Extend(1, "res", a->grant().token, 5000);
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }, 15000));
  EXPECT_LT(MsBetween(a->at, Clock::now()), validity) << "answered before the validity ended";
  for (const auto& n : nodes_) {
    const auto ext = n->Commands(Op::kExtend);
    ASSERT_EQ(ext.size(), 1u);
    ASSERT_TRUE(ext[0].reply.has_value());
  }
  EXPECT_TRUE(e->extended()) << (e->result && std::holds_alternative<Failure>(*e->result)
                                     ? std::get<Failure>(*e->result).message
                                     : std::string("?"));
  EXPECT_EQ(engine_->HeldBy(1).size(), 1u) << "the lock was dropped";
  EXPECT_EQ(node(0).Count(Op::kDelete), 0u);
}

// 12.
TEST_F(LockEngineTest, RenewedLockIsExtendedUntilMastersStopThenReportedLost) {
  // A 1.5 s ttl renewed every 500 ms: each renewal has a second to be answered (by masters that
  // answer on the next loop turn) before the lock would be lost.
  constexpr int64_t kTtlMs = 1500;
  MakeEngine(Options(/*node_timeout_ms=*/50, /*retry_delay_ms=*/20, /*retry_jitter_ms=*/10));
  AcquireRecord* a = Acquire(1, "res", kTtlMs, 0, /*renew=*/true);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->granted()) << a->Describe();
  const std::string token = a->grant().token;

  RunFor(2 * kTtlMs);
  EXPECT_TRUE(lost_.empty()) << "a renewed lock is not lost while masters answer";
  const auto ext = node(0).Commands(Op::kExtend);
  EXPECT_GE(ext.size(), 3u);
  for (const auto& c : ext) {
    EXPECT_EQ(c.token, token);
    EXPECT_EQ(c.ttl_ms, kTtlMs);
  }
  ASSERT_EQ(engine_->HeldBy(1).size(), 1u);
  EXPECT_TRUE(engine_->HeldBy(1)[0].renew);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Holder(Key("res")), token) << "kept alive on master " << n->index();
  }

  for (int i = 0; i < 3; ++i) node(i).Hold();
  const auto stopped = Clock::now();
  ASSERT_TRUE(RunUntil([this] { return !lost_.empty(); }, 10 * kTtlMs));
  const LostEvent lost = lost_[0];
  EXPECT_EQ(lost.session, 1u);
  EXPECT_EQ(lost.resource, "res");
  EXPECT_EQ(lost.token, token);
  EXPECT_EQ(lost.reason, "renew_failed");

  // The last renewal that won: node 0's last extension answered with 1.
  std::optional<Clock::time_point> last_ok;
  for (const auto& c : node(0).Commands(Op::kExtend)) {
    if (c.reply && c.reply->kind == Reply::Kind::kInteger && c.reply->integer == 1) {
      last_ok = c.sent;
    }
  }
  ASSERT_TRUE(last_ok.has_value());
  EXPECT_LE(*last_ok, stopped);
  // Lost when the validity of the last renewal that won (ttl - drift from its start) ran out:
  // not while it was clearly still valid, and not a whole ttl later.
  const int64_t after_ok = MsBetween(*last_ok, lost.at);
  EXPECT_GE(after_ok, kTtlMs * 2 / 3) << "declared lost while clearly still valid";
  EXPECT_LT(after_ok, 2 * kTtlMs) << "lost long after the validity ran out";

  EXPECT_TRUE(engine_->HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 0u);
  RunFor(100);
  EXPECT_EQ(lost_.size(), 1u) << "a loss is reported once";
}

// 13.
TEST_F(LockEngineTest, NonRenewedLockExpiresAndTheNextWaiterGetsIt) {
  MakeEngine();
  constexpr int64_t kTtlMs = 500;
  const auto start = Clock::now();
  AcquireRecord* a1 = Acquire(1, "res", kTtlMs, 0);
  ASSERT_TRUE(RunUntil([a1] { return a1->calls > 0; }));
  ASSERT_TRUE(a1->granted()) << a1->Describe();
  const int64_t validity = a1->grant().validity_ms;
  // Waits up to 30 s: had the loss not been declared at the validity's end, the waiter would
  // still be waiting.
  AcquireRecord* a2 = Acquire(2, "res", 10000, 30000);

  ASSERT_TRUE(RunUntil([this] { return !lost_.empty(); }, 20000));
  const LostEvent lost = lost_[0];
  EXPECT_EQ(lost.session, 1u);
  EXPECT_EQ(lost.resource, "res");
  EXPECT_EQ(lost.token, a1->grant().token);
  EXPECT_EQ(lost.reason, "expired");
  EXPECT_GE(MsBetween(start, lost.at), validity - 1) << "not before the validity ran out";
  EXPECT_LT(MsBetween(start, lost.at), validity + 2 * kTtlMs) << "long after the validity";
  EXPECT_TRUE(engine_->HeldBy(1).empty());
  EXPECT_EQ(node(0).Count(Op::kExtend), 0u) << "a lock without renew is never extended";

  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  for (const auto& n : nodes_) {
    const auto sets = n->Commands(Op::kSet);
    ASSERT_EQ(sets.size(), 2u) << "the waiter contended only once the lock was gone";
    EXPECT_EQ(sets[1].token, a2->grant().token);
    EXPECT_GE(sets[1].sent, lost.at);
  }
  ASSERT_EQ(engine_->HeldBy(2).size(), 1u);
  EXPECT_EQ(lost_.size(), 1u);
}

// 14.
TEST_F(LockEngineTest, CloseSessionReleasesLocksAndDropsWaitersSilently) {
  MakeEngine();
  const std::string ta = Hold(1, "a");
  const std::string tb = Hold(1, "b");
  const std::string tc = Hold(3, "c");
  AcquireRecord* s1_waits_c = Acquire(1, "c", 10000, 200);
  AcquireRecord* s2_waits_a = Acquire(2, "a", 10000, 5000);
  RunFor(20);
  EXPECT_EQ(s1_waits_c->calls + s2_waits_a->calls, 0);

  engine_->CloseSession(1);
  ASSERT_TRUE(RunUntil([s2_waits_a] { return s2_waits_a->calls > 0; }));
  ASSERT_TRUE(s2_waits_a->granted()) << s2_waits_a->Describe();
  ExpectDeletedEverywhere(Key("a"), ta);
  ExpectDeletedEverywhere(Key("b"), tb);
  for (const auto& n : nodes_) {
    const auto sets = Tokens(*n, Op::kSet, Key("a"));
    ASSERT_EQ(sets.size(), 2u);
    EXPECT_EQ(sets[1], s2_waits_a->grant().token);
    EXPECT_LT(IndexOf(*n, Op::kDelete, ta), IndexOf(*n, Op::kSet, sets[1]));
  }
  EXPECT_TRUE(engine_->HeldBy(1).empty());

  RunFor(300);  // well past the dropped waiter's wait_ms
  EXPECT_EQ(s1_waits_c->calls, 0) << "a closed session's waiters are not called back";
  Release(3, "c", tc);
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(30);
  EXPECT_EQ(s1_waits_c->calls, 0);
  for (const auto& n : nodes_) {
    EXPECT_EQ(Tokens(*n, Op::kSet, Key("c")).size(), 1u) << "the dropped waiter never contends";
    EXPECT_EQ(n->Holder(Key("c")), std::nullopt);
    EXPECT_EQ(n->Holder(Key("b")), std::nullopt);
  }
}

// 15.
TEST_F(LockEngineTest, CloseSessionDuringAttemptUndoesTheWinAndHandsOver) {
  MakeEngine(Options(/*node_timeout_ms=*/200));
  for (auto& n : nodes_) n->Delay(40);
  AcquireRecord* a1 = Acquire(1, "res", 10000, 3000);
  AcquireRecord* a2 = Acquire(2, "res", 10000, 3000);
  ASSERT_EQ(node(0).Count(Op::kSet), 1u) << "session 1's attempt is in flight";
  const std::string t1 = node(0).log()[0].token;
  engine_->CloseSession(1);

  ASSERT_TRUE(RunUntil([a2] { return a2->calls > 0; }));
  ASSERT_TRUE(a2->granted()) << a2->Describe();
  const std::string t2 = a2->grant().token;
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) {
    const auto& log = n->log();
    ASSERT_EQ(log.size(), 3u) << "node " << n->index();
    EXPECT_EQ(log[0].op, Op::kSet);
    EXPECT_EQ(log[0].token, t1);
    ASSERT_TRUE(log[0].reply.has_value());
    EXPECT_EQ(log[0].reply->text, "OK") << "session 1's attempt won on every master";
    EXPECT_EQ(log[1].op, Op::kDelete);
    EXPECT_EQ(log[1].token, t1);
    EXPECT_EQ(log[2].op, Op::kSet);
    EXPECT_EQ(log[2].token, t2);
    EXPECT_EQ(n->Holder(Key("res")), t2);
  }
  EXPECT_EQ(a1->calls, 0);
  EXPECT_TRUE(engine_->HeldBy(1).empty());
  EXPECT_EQ(engine_->locks_held(), 1u);
  EXPECT_TRUE(lost_.empty());
}

// 16.
TEST_F(LockEngineTest, ShutdownFailsWaitersReleasesLocksThenCallsDone) {
  MakeEngine(Options(/*node_timeout_ms=*/200));
  const std::string ta = Hold(1, "a");
  AcquireRecord* waits_a = Acquire(2, "a", 10000, 5000);
  for (auto& n : nodes_) n->Delay(40);
  AcquireRecord* contends_b = Acquire(3, "b", 10000, 5000);
  ASSERT_EQ(Tokens(node(0), Op::kSet, Key("b")).size(), 1u);
  const std::string tb = Tokens(node(0), Op::kSet, Key("b"))[0];

  int done_calls = 0;
  bool all_answered_at_done = false;
  engine_->Shutdown([&] {
    ++done_calls;
    all_answered_at_done = TotalPending() == 0;
  });
  ASSERT_TRUE(RunUntil([&] { return done_calls > 0; }));
  EXPECT_TRUE(waits_a->failed(ErrorCode::kShuttingDown)) << waits_a->Describe();
  EXPECT_TRUE(contends_b->failed(ErrorCode::kShuttingDown)) << contends_b->Describe();
  ExpectDeletedEverywhere(Key("a"), ta);
  ExpectDeletedEverywhere(Key("b"), tb);  // the attempt in flight is undone too
  EXPECT_TRUE(all_answered_at_done) << "done must wait for every delete round";
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Holder(Key("a")), std::nullopt);
    EXPECT_EQ(n->Holder(Key("b")), std::nullopt);
  }
  EXPECT_TRUE(engine_->HeldBy(1).empty());

  const size_t sent = TotalCommands();
  AcquireRecord* late = Acquire(4, "c", 10000, 1000);
  EXPECT_EQ(late->calls, 0) << "the callback must never run inside Acquire";
  ASSERT_TRUE(RunUntil([late] { return late->calls > 0; }));
  EXPECT_TRUE(late->failed(ErrorCode::kShuttingDown)) << late->Describe();
  RunFor(100);
  EXPECT_EQ(TotalCommands(), sent);
  EXPECT_EQ(done_calls, 1);
  EXPECT_EQ(waits_a->calls, 1);
  EXPECT_EQ(contends_b->calls, 1);
}

// 16b.
TEST_F(LockEngineTest, ShutdownWithNothingToReleaseCallsDoneFromTheLoop) {
  MakeEngine();
  int done_calls = 0;
  engine_->Shutdown([&] { ++done_calls; });
  EXPECT_EQ(done_calls, 0);
  ASSERT_TRUE(RunUntil([&] { return done_calls > 0; }));
  RunFor(20);
  EXPECT_EQ(done_calls, 1);
  EXPECT_EQ(TotalCommands(), 0u);
}

// ---- Rounds -----------------------------------------------------------------------------------

class RoundsTest : public LoopTest {
 protected:
  void DestroyUsers() override { rounds_.reset(); }

  struct Result {
    int calls = 0;
    std::optional<VoteTally> tally;
    Clock::time_point at;
  };

  Result* Run(RoundOp op, bool wait_all, const std::string& key = "k",
              const std::string& token = "t") {
    Result* res = &results_.emplace_back();
    RoundRequest req;
    req.op = op;
    req.key = key;
    req.token = token;
    req.ttl_ms = 1000;
    req.wait_all = wait_all;
    rounds_->Run(std::move(req), [res](const RoundResult& r) {
      ++res->calls;
      res->tally = r.tally;
      res->at = Clock::now();
    });
    return res;
  }

  std::unique_ptr<Rounds> rounds_;
  std::deque<Result> results_;
};

// 17.
TEST_F(RoundsTest, AnswersAfterTheDeadlineAreIgnored) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 50);
  for (int i = 2; i < 5; ++i) node(i).Hold();
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kSetIfAbsent, /*wait_all=*/false);
  EXPECT_EQ(r->calls, 0) << "done must never run inside Run";
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));
  EXPECT_GE(MsBetween(start, r->at), 45);
  EXPECT_EQ(r->tally->yes(), 2);
  EXPECT_EQ(r->tally->outstanding(), 3);
  EXPECT_FALSE(r->tally->Won());
  EXPECT_EQ(rounds_->in_flight(), 0u);

  for (int i = 2; i < 5; ++i) node(i).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r->calls, 1) << "late answers must not end the round again";
  EXPECT_EQ(r->tally->yes(), 2);
  for (int i = 2; i < 5; ++i) {
    ASSERT_TRUE(node(i).log()[0].reply.has_value());
    EXPECT_EQ(node(i).log()[0].reply->text, "OK");
  }
}

TEST_F(RoundsTest, EndsAtQuorumAndIgnoresTheRest) {
  // The other two answer only when the test lets them, and the deadline is 20 s away: the
  // round can only have ended on the quorum.
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 20000);
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kSetIfAbsent, /*wait_all=*/false);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }, 15000));
  EXPECT_LT(MsBetween(start, r->at), 10000) << "waited for the deadline";
  EXPECT_TRUE(r->tally->Won());
  EXPECT_EQ(r->tally->yes(), 3);
  EXPECT_EQ(r->tally->outstanding(), 2);
  node(3).ReleaseHeld();
  node(4).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r->calls, 1);
  EXPECT_EQ(r->tally->yes(), 3);
}

TEST_F(RoundsTest, EndsAsSoonAsQuorumIsOutOfReach) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 20000);
  for (int i = 0; i < 3; ++i) node(i).Put("k", "other", 600000);
  node(3).Hold();
  node(4).Hold();
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kSetIfAbsent, /*wait_all=*/false);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }, 15000));
  EXPECT_LT(MsBetween(start, r->at), 10000) << "no need to wait for the (20 s) deadline";
  EXPECT_TRUE(r->tally->Lost());
  EXPECT_EQ(r->tally->no(), 3);
  node(3).ReleaseHeld();
  node(4).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r->calls, 1);
}

TEST_F(RoundsTest, WaitAllEndsOnceEveryMasterAnswered) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 20000);
  for (int i = 0; i < 3; ++i) node(i).Put("k", "t", 600000);
  node(3).Fail();
  node(4).Delay(40);
  const auto start = Clock::now();
  Result* r = Run(RoundOp::kDeleteIfHeld, /*wait_all=*/true);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }, 15000));
  EXPECT_GE(MsBetween(start, r->at), 40 - 1) << "waited for the slow master";
  EXPECT_LT(MsBetween(start, r->at), 10000) << "did not wait for the (20 s) deadline";
  EXPECT_TRUE(r->tally->AllIn());
  EXPECT_EQ(r->tally->yes(), 3);
  EXPECT_EQ(r->tally->no(), 1);
  EXPECT_EQ(r->tally->failed(), 1);
  RunFor(20);
  EXPECT_EQ(r->calls, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node(i).Holder("k"), std::nullopt);
}

TEST_F(RoundsTest, ConcurrentRoundsEachEndExactlyOnce) {
  rounds_ = std::make_unique<Rounds>(&loop_, NodePtrs(), 60);
  for (int i = 0; i < 3; ++i) node(i).Hold();
  Result* r1 = Run(RoundOp::kExtendIfHeld, /*wait_all=*/false, "k1");
  RunFor(15);
  Result* r2 = Run(RoundOp::kExtendIfHeld, /*wait_all=*/true, "k2");
  ASSERT_TRUE(RunUntil([&] { return r1->calls > 0 && r2->calls > 0; }));
  EXPECT_LE(r1->at, r2->at) << "deadlines come in start order";
  EXPECT_EQ(r1->tally->outstanding(), 3);
  EXPECT_EQ(r2->tally->outstanding(), 3);
  EXPECT_EQ(r1->tally->no(), 2);  // nothing to extend on the answering masters
  for (int i = 0; i < 3; ++i) node(i).ReleaseHeld();
  ASSERT_TRUE(RunUntilQuiet());
  RunFor(20);
  EXPECT_EQ(r1->calls, 1);
  EXPECT_EQ(r2->calls, 1);
  EXPECT_EQ(rounds_->in_flight(), 0u);
}

// ---- what the engine reports to metrics ----------------------------------------------------

struct RecordingObserver final : EngineObserver {
  std::vector<std::pair<AcquireOutcome, int>> acquires;  // outcome, attempts
  int holds_ended = 0;
  std::vector<RenewOutcome> renewals;
  std::vector<std::string> lost;
  std::vector<size_t> missed;
  void AcquireFinished(AcquireOutcome o, std::chrono::nanoseconds, int attempts) override {
    acquires.emplace_back(o, attempts);
  }
  void HoldEnded(std::chrono::nanoseconds) override { ++holds_ended; }
  void Renewed(RenewOutcome o) override { renewals.push_back(o); }
  void LockLost(std::string_view reason) override { lost.emplace_back(reason); }
  void MasterMissedDeadline(size_t index) override { missed.push_back(index); }
};

TEST_F(LockEngineTest, ReportsOutcomesAttemptsHoldsAndSilentMasters) {
  RecordingObserver seen;
  EngineOptions options = Options(/*node_timeout_ms=*/40);
  options.observer = &seen;
  MakeEngine(options);
  node(4).Hold();  // silent: it misses every deadline it is part of
  const std::string token = Hold(1, "res", 10'000);
  AcquireRecord* queued = Acquire(2, "res", 10'000, 30);  // times out behind session 1
  ASSERT_TRUE(RunUntil([queued] { return queued->calls > 0; }));
  ASSERT_EQ(seen.acquires.size(), 2u);
  EXPECT_EQ(seen.acquires[0], std::make_pair(AcquireOutcome::kAcquired, 1));
  EXPECT_EQ(seen.acquires[1], std::make_pair(AcquireOutcome::kTimeout, 0));

  ReleaseRecord* r = Release(1, "res", token);
  ASSERT_TRUE(RunUntil([r] { return r->calls > 0; }));  // waits for all: ends by deadline
  EXPECT_EQ(seen.holds_ended, 1);
  ASSERT_FALSE(seen.missed.empty());
  for (size_t i : seen.missed) EXPECT_EQ(i, 4u) << "only the silent master misses deadlines";

  for (int i = 0; i < 3; ++i) node(i).Fail();  // no quorum from now on
  AcquireRecord* failed = Acquire(3, "other", 10'000, 0);
  ASSERT_TRUE(RunUntil([failed] { return failed->calls > 0; }));
  EXPECT_EQ(seen.acquires.back(), std::make_pair(AcquireOutcome::kNoQuorum, 1));
}


// ---- fencing and restart quarantine ------------------------------------------------------------

using ::testing::HasSubstr;

TEST_F(LockEngineTest, FencedGrantsGetIncreasingFencesWrittenWhereTheKeyIsHeld) {
  MakeEngine();
  std::string token;
  const auto first = FencedGrant(1, "res", &token);
  ASSERT_EQ(first, 1);
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Count(Op::kSetReadFence), 1u);
    EXPECT_EQ(n->Count(Op::kSet), 0u) << "a fenced acquire sets the key in the fence script";
    EXPECT_EQ(n->Counter("fence:res"), 1) << "node " << n->index();
    // Phase 2 went out after phase 1 on the same connection, with the grant's token.
    EXPECT_LT(IndexOf(*n, Op::kSetReadFence, token), IndexOf(*n, Op::kRaiseFence, token));
  }
  Release(1, "res", token);
  EXPECT_EQ(FencedGrant(2, "res"), 2);
  AcquireRecord* plain = Acquire(3, "other", 1000, 0);
  ASSERT_TRUE(RunUntil([plain] { return plain->calls > 0; }));
  ASSERT_TRUE(plain->granted());
  EXPECT_FALSE(plain->grant().fence.has_value()) << "only asked-for fences are issued";
}

TEST_F(LockEngineTest, FenceIsOneAboveTheHighestCounterOfTheMastersThatGranted) {
  MakeEngine();
  const int64_t counters[] = {3, 10, 7, 0, 99};
  for (int i = 0; i < kNodes; ++i) nodes_[i]->SetCounter("fence:res", counters[i]);
  nodes_[4]->Hold();  // its 99 is never read: 4 of 5 answer
  EXPECT_EQ(FencedGrant(1, "res"), 11);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(nodes_[i]->Counter("fence:res"), 11) << i;
  EXPECT_EQ(nodes_[4]->Counter("fence:res"), 99);
}

TEST_F(LockEngineTest, FencedAcquireNeedsTheFenceQuorumWherePlainLocksNeedAMajority) {
  MakeEngine();
  ASSERT_EQ(engine_->fence_quorum(), 4);
  nodes_[3]->Fail();
  nodes_[4]->Fail();
  AcquireRecord* plain = Acquire(1, "plain", 1000, 0);
  AcquireRecord* fenced = Acquire(2, "fenced", 1000, 0, false, /*fence=*/true);
  ASSERT_TRUE(RunUntil([&] { return plain->calls > 0 && fenced->calls > 0; }));
  EXPECT_TRUE(plain->granted()) << plain->Describe();
  ASSERT_TRUE(fenced->failed(ErrorCode::kNoQuorum)) << fenced->Describe();
  EXPECT_THAT(fenced->failure().message, HasSubstr("a fenced grant needs 4 of 5"));
  ASSERT_TRUE(RunUntilQuiet());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(nodes_[i]->Holder(Key("fenced")), std::nullopt) << "undone on node " << i;
  }
}

// Why the fence quorum is 4 of 5 and not 3: two masters restart without their data right after
// a grant that only 4 masters confirmed. A read from any 4 still includes a survivor.
TEST_F(LockEngineTest, FencesKeepIncreasingWhenTwoMastersLoseTheirData) {
  MakeEngine();
  for (int i = 0; i < kNodes; ++i) nodes_[i]->SetCounter("fence:res", 40);
  nodes_[4]->Fail();  // down: never sees the grant
  std::string token;
  ASSERT_EQ(FencedGrant(1, "res", &token), 41);  // written on 0..3 only
  Release(1, "res", token);
  ASSERT_TRUE(RunUntil([&] { return !nodes_[0]->Holder(Key("res")); }));
  nodes_[0]->Forget();
  nodes_[1]->Forget();
  nodes_[2]->Fail();  // the next grant hears 0, 1 (forgot), 3 (has 41) and 4 (has 40)
  nodes_[4]->Immediate();
  const auto second = FencedGrant(2, "res");
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(*second, 41);
}

TEST_F(LockEngineTest, WithAFenceQuorumOfAMajorityDataLossCanMakeFencesGoBackwards) {
  EngineOptions options = Options();
  options.fence_quorum = 3;  // what an operator may choose for masters that never lose data
  MakeEngine(options);
  for (int i = 0; i < kNodes; ++i) nodes_[i]->SetCounter("fence:res", 40);
  nodes_[3]->Fail();
  nodes_[4]->Fail();
  std::string token;
  ASSERT_EQ(FencedGrant(1, "res", &token), 41);  // written on 0..2 only
  Release(1, "res", token);
  ASSERT_TRUE(RunUntil([&] { return !nodes_[0]->Holder(Key("res")); }));
  nodes_[0]->Forget();
  nodes_[1]->Forget();
  nodes_[2]->Fail();
  nodes_[3]->Immediate();
  nodes_[4]->Immediate();
  // Documented in docs/safety.md: the only survivor of the grant above does not answer.
  EXPECT_EQ(FencedGrant(2, "res"), 41);
}

TEST_F(LockEngineTest, QuarantinedMastersDoNotCountTowardAcquireQuorum) {
  MakeEngine();
  for (int i = 0; i < 3; ++i) nodes_[i]->Quarantine(true);
  AcquireRecord* a = Acquire(1, "res", 1000, 0);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  ASSERT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  EXPECT_THAT(a->failure().message, HasSubstr("3 of 5 masters are in restart quarantine"));
  ASSERT_TRUE(RunUntilQuiet());
  for (const auto& n : nodes_) {
    EXPECT_EQ(n->Count(Op::kSet), 1u) << "quarantined masters still get the command";
    EXPECT_EQ(n->Holder(Key("res")), std::nullopt) << "and its undo";
  }
  nodes_[0]->Quarantine(false);
  AcquireRecord* b = Acquire(1, "res", 1000, 0);
  ASSERT_TRUE(RunUntil([b] { return b->calls > 0; }));
  EXPECT_TRUE(b->granted()) << "3 counting masters: 0, 3, 4. " << b->Describe();
}

TEST_F(LockEngineTest, QuarantinedMastersDoNotCountTowardExtendQuorum) {
  MakeEngine();
  const std::string token = Hold(1, "res");
  for (int i = 0; i < 3; ++i) nodes_[i]->Quarantine(true);
  ExtendRecord* e = Extend(1, "res", token, 5000);
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }));
  ASSERT_TRUE(e->failed(ErrorCode::kNoQuorum));
  EXPECT_THAT(std::get<Failure>(*e->result).message, HasSubstr("3 master(s) are in restart quarantine"));
  EXPECT_EQ(engine_->HeldBy(1).size(), 1u) << "still valid: the lock is kept";
}

TEST_F(LockEngineTest, QuarantinedMastersStillCountTowardTheFenceQuorum) {
  MakeEngine();
  nodes_[0]->Quarantine(true);
  nodes_[1]->Quarantine(true);
  nodes_[2]->Hold();  // counting: 3 and 4 only... not a quorum
  AcquireRecord* a = Acquire(1, "res", 1000, 0, false, /*fence=*/true);
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }));
  EXPECT_TRUE(a->failed(ErrorCode::kNoQuorum)) << a->Describe();
  nodes_[2]->ReleaseHeld();
  nodes_[2]->Immediate();
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(FencedGrant(2, "res"), 1) << "2, 3, 4 count; 0 and 1 make up the fence quorum";
}

class FakeWatch : public ReleaseWatch {
 public:
  void Watch(const std::string& key) override { watched.insert(key); }
  void Unwatch(const std::string& key) override {
    watched.erase(key);
    ++unwatches;
  }
  std::set<std::string> watched;
  int unwatches = 0;
};

TEST_F(LockEngineTest, AWaiterForAKeyHeldElsewhereTriesAgainWhenItsReleaseIsAnnounced) {
  FakeWatch watch;
  // The retry would come only after 20 s: a grant within 10 s of the announcement is its doing.
  EngineOptions options = Options(/*node_timeout_ms=*/50, /*retry_delay_ms=*/20000,
                                  /*retry_jitter_ms=*/0);
  options.release_watch = &watch;
  MakeEngine(options);
  for (auto& n : nodes_) n->Put(Key("res"), "another-agent", 600'000);
  AcquireRecord* a = Acquire(1, "res", 1000, 60'000);
  ASSERT_TRUE(RunUntil([&] { return watch.watched.count(Key("res")) == 1; }));
  engine_->ReleasedElsewhere(Key("unrelated"));  // ignored
  for (auto& n : nodes_) n->Erase(Key("res"));
  engine_->ReleasedElsewhere(Key("res"));
  ASSERT_TRUE(RunUntil([a] { return a->calls > 0; }, /*timeout_ms=*/10000))
      << "without the announcement the retry would come only after 20 s";
  EXPECT_TRUE(a->granted()) << a->Describe();
  Release(1, "res", a->grant().token);
  ASSERT_TRUE(RunUntil([&] { return watch.watched.empty(); }));
  EXPECT_EQ(watch.unwatches, 1) << "the watch ends when nobody here wants the key any more";
}

}  // namespace
}  // namespace lw
