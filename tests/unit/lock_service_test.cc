// LockService (agent/lock_service.h) against an engine on fake masters, driven line by line as
// the transport drives it: replies carry their request's id, the client limits refuse what
// they bound and lose nothing else, a closed session's locks go to the next waiter and its
// object goes, and a detached lease outlives its connection, counted against its uid's limit
// and released only by whom it allows.

#include "agent/lock_service.h"

#include <nlohmann/json.hpp>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

// The transport's side: every line the service sends, by session.
class RecordingWriter final : public SessionWriter {
 public:
  void Send(SessionId session, std::string line) override {
    sent.emplace_back(session, nlohmann::json::parse(line));
  }
  std::vector<std::pair<SessionId, nlohmann::json>> sent;
};

class LockServiceTest : public LockEngineTest {
 protected:
  void DestroyUsers() override {
    service_.reset();
    LockEngineTest::DestroyUsers();
  }

  void MakeService(ServiceOptions options = {}) {
    EngineOptions engine_options = Options();
    engine_options.sessions = &sessions_;
    MakeEngine(engine_options);
    service_ = std::make_unique<LockService>(writer_, sessions_, *engine_, std::move(options),
                                             request_stats_);
  }

  void Open(SessionId session, int pid, int uid) {
    service_->Opened(session, Peer{pid, uid, uid, "job " + std::to_string(pid)}, {});
  }

  // Sends one request line (id: `id`) and drives the loop until the session got its reply.
  nlohmann::json Ask(SessionId session, int id, const std::string& body) {
    SendLine(session, id, body);
    nlohmann::json reply;
    EXPECT_TRUE(RunUntil([&] { return ReplyTo(session, id, &reply); })) << body;
    return reply;
  }
  void SendLine(SessionId session, int id, const std::string& body) {
    service_->Line(session, R"({"id":)" + std::to_string(id) + "," + body + "}");
  }
  bool ReplyTo(SessionId session, int id, nlohmann::json* out) const {
    for (const auto& [s, line] : writer_.sent) {
      if (s == session && line["id"] == id) {
        *out = line;
        return true;
      }
    }
    return false;
  }
  static std::string CodeOf(const nlohmann::json& reply) {
    return reply.value("ok", true) ? "" : reply.value("error", "?");
  }

  static ServiceOptions Bounded(size_t max_inflight, size_t max_locks) {
    ServiceOptions o;
    o.max_inflight = max_inflight;
    o.max_locks = max_locks;
    return o;
  }

  SessionTable sessions_;  // outlives the engine and the service, which keep state in it
  RecordingWriter writer_;
  stats::Registry request_registry_;
  RequestStats request_stats_{request_registry_};
  std::unique_ptr<LockService> service_;
};

TEST_F(LockServiceTest, RepliesCarryTheirIdAndASessionIsIdleOnlyWithNothingHeldOrAsked) {
  MakeService();
  Open(1, 100, 1000);
  EXPECT_TRUE(service_->Idle(1));
  const nlohmann::json granted = Ask(1, 7, R"("op":"acquire","resource":"a","ttl_ms":5000)");
  ASSERT_TRUE(granted.value("ok", false)) << granted.dump();
  EXPECT_FALSE(service_->Idle(1)) << "a holding session is kept open by the idle sweep";
  const nlohmann::json released = Ask(
      1, 8, R"("op":"release","resource":"a","token":")" + granted.value("token", "") + "\"");
  EXPECT_TRUE(released.value("ok", false)) << released.dump();
  EXPECT_TRUE(service_->Idle(1));
}

TEST_F(LockServiceTest, ABadLineGetsACodedErrorAndTheSessionGoesOn) {
  MakeService();
  Open(1, 100, 1000);
  service_->Line(1, R"({"id":1,"op":"acquire","resource":"a","ttl_ms":-5})");
  service_->Line(1, "not json");
  ASSERT_EQ(writer_.sent.size(), 2u) << "errors are answered at once";
  EXPECT_EQ(CodeOf(writer_.sent[0].second), "bad_request") << writer_.sent[0].second.dump();
  EXPECT_EQ(writer_.sent[0].second["id"], 1);
  EXPECT_FALSE(writer_.sent[1].second.value("ok", true));
  EXPECT_TRUE(Ask(1, 2, R"("op":"ping")").value("ok", false));
  EXPECT_TRUE(service_->Idle(1)) << "refused requests are not in flight";
}

TEST_F(LockServiceTest, MaxInflightRefusesTheRequestBeyondItAndLosesNoEarlierOne) {
  MakeService(Bounded(/*max_inflight=*/2, 0));
  Open(1, 100, 1000);
  Open(2, 200, 1000);
  ASSERT_TRUE(Ask(1, 1, R"("op":"acquire","resource":"a","ttl_ms":5000)").value("ok", false));
  SendLine(2, 1, R"("op":"acquire","resource":"a","ttl_ms":5000,"wait_ms":10000)");
  SendLine(2, 2, R"("op":"acquire","resource":"a","ttl_ms":5000,"wait_ms":10000)");
  const nlohmann::json refused = Ask(2, 3, R"("op":"ping")");
  EXPECT_EQ(CodeOf(refused), "too_many") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("max_inflight_per_session"),
            std::string::npos);
  service_->Closed(1);  // its lock goes to session 2's first waiter
  nlohmann::json first;
  ASSERT_TRUE(RunUntil([&] { return ReplyTo(2, 1, &first); }));
  EXPECT_TRUE(first.value("ok", false)) << first.dump();
  EXPECT_TRUE(Ask(2, 4, R"("op":"ping")").value("ok", false)) << "one answered: room again";
}

TEST_F(LockServiceTest, MaxLocksCountsHeldAndQueuedLocksOfTheSession) {
  MakeService(Bounded(0, /*max_locks=*/2));
  Open(1, 100, 1000);
  Open(2, 200, 1000);
  ASSERT_TRUE(Ask(2, 1, R"("op":"acquire","resource":"b","ttl_ms":5000)").value("ok", false));
  ASSERT_TRUE(Ask(1, 1, R"("op":"acquire","resource":"a","ttl_ms":5000)").value("ok", false));
  SendLine(1, 2, R"("op":"acquire","resource":"b","ttl_ms":5000,"wait_ms":10000)");
  const nlohmann::json refused = Ask(1, 3, R"("op":"acquire","resource":"c","ttl_ms":5000)");
  EXPECT_EQ(CodeOf(refused), "too_many") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("max_locks_per_session"),
            std::string::npos);
  EXPECT_TRUE(Ask(2, 2, R"("op":"acquire","resource":"c","ttl_ms":5000)").value("ok", false))
      << "another session's limit is its own";
}

TEST_F(LockServiceTest, AClosedSessionsLocksGoToTheNextWaiterAndItsObjectGoes) {
  MakeService();
  Open(1, 100, 1000);
  Open(2, 200, 1000);
  ASSERT_TRUE(Ask(1, 1, R"("op":"acquire","resource":"a","ttl_ms":5000)").value("ok", false));
  SendLine(2, 1, R"("op":"acquire","resource":"a","ttl_ms":5000,"wait_ms":10000)");
  ASSERT_EQ(service_->Locks().size(), 1u);
  EXPECT_EQ(service_->Locks()[0].holder.pid, 100);
  service_->Closed(1);
  nlohmann::json granted;
  ASSERT_TRUE(RunUntil([&] { return ReplyTo(2, 1, &granted); }));
  EXPECT_TRUE(granted.value("ok", false)) << granted.dump();
  ASSERT_EQ(service_->Locks().size(), 1u);
  EXPECT_EQ(service_->Locks()[0].holder.pid, 200);
  EXPECT_EQ(sessions_.Find(1), nullptr) << "a closed session leaves nothing behind";
  EXPECT_EQ(service_->PeerOf(1).pid, -1);
  const size_t sent = writer_.sent.size();
  service_->NotifyLost(1, "a", "x", "expired");  // a late event for it is dropped
  EXPECT_EQ(writer_.sent.size(), sent);
}

TEST_F(LockServiceTest, ADetachedLeaseOutlivesItsConnectionAndOnlyItsUidReleasesIt) {
  MakeService();
  Open(1, 100, 1000);
  const nlohmann::json lease =
      Ask(1, 1, R"("op":"acquire","resource":"nightly","ttl_ms":5000,"detach":true)");
  ASSERT_TRUE(lease.value("ok", false)) << lease.dump();
  service_->Closed(1);
  std::vector<LockView> locks = service_->Locks();
  ASSERT_EQ(locks.size(), 1u) << "closing its connection leaves the lease held";
  EXPECT_TRUE(locks[0].detached);
  EXPECT_EQ(locks[0].holder.pid, 100) << "the view names its creator";
  const std::string release =
      R"("op":"release","resource":"nightly","token":")" + lease.value("token", "") + "\"";
  Open(2, 200, 2000);
  EXPECT_EQ(CodeOf(Ask(2, 1, release)), "forbidden");
  Open(3, 300, 1000);
  const nlohmann::json released = Ask(3, 1, release);
  EXPECT_TRUE(released.value("ok", false)) << released.dump();
  EXPECT_TRUE(service_->Locks().empty());
}

TEST_F(LockServiceTest, ADetachedAcquireCountsAgainstItsUidAcrossConnections) {
  MakeService(Bounded(0, /*max_locks=*/1));
  Open(1, 100, 1000);
  Open(2, 200, 1000);
  Open(3, 300, 2000);
  const std::string detached = R"("op":"acquire","ttl_ms":5000,"detach":true,"resource":)";
  ASSERT_TRUE(Ask(1, 1, detached + R"("a")").value("ok", false));
  const nlohmann::json refused = Ask(2, 1, detached + R"("b")");
  EXPECT_EQ(CodeOf(refused), "too_many") << "uid 1000 has its one lease: " << refused.dump();
  EXPECT_TRUE(Ask(3, 1, detached + R"("b")").value("ok", false)) << "uid 2000 has none";
  EXPECT_TRUE(Ask(2, 2, R"("op":"acquire","resource":"c","ttl_ms":5000)").value("ok", false))
      << "leases do not count against the connection's own locks";
}

// The next process's side of a pre-copied upgrade: the copied holds are entered as they come;
// at the hand-over the changed ones are brought up to date, the ended ones dropped, and the
// holds of a session no connection came for forgotten; nothing is sent to the masters.
TEST_F(LockServiceTest, APreCopyIsBroughtUpToDateAtTheHandOver) {
  MakeService();
  const auto soon = Clock::now() + std::chrono::seconds(2);
  const auto later = Clock::now() + std::chrono::seconds(20);
  auto hold = [&](uint64_t serial, const std::string& resource) {
    HandedHold h;
    h.serial = serial;
    h.resource = resource;
    h.token = h.value = std::string(40, static_cast<char>('a' + serial));
    h.ttl_ms = 3'000;
    h.acquired = Clock::now();
    h.valid_until = soon;
    return h;
  };
  handover::PreCopy slice;
  slice.holds = {{5, hold(1, "kept")}, {5, hold(2, "renewed")}, {5, hold(3, "ended")},
                 {6, hold(4, "closed")}};
  LockService::Staged staged;
  service_->Stage(slice, staged);
  ASSERT_EQ(engine_->locks_held(), 4u);

  Open(5, 100, 1000);  // the connection of session 5 came back under its id; 6's did not
  std::vector<HandedHold> late;
  service_->UpdateStaged({{2, 30'000, later}}, staged, late);
  service_->DropStale(staged, {3}, {5});
  EXPECT_TRUE(late.empty());
  const auto held = engine_->books().HeldBy(5);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].resource, "kept");
  EXPECT_LE(held[0].validity_ms, 2'000) << "unchanged: its copy's validity";
  EXPECT_EQ(held[1].resource, "renewed");
  EXPECT_GT(held[1].validity_ms, 15'000) << "the update's validity";
  EXPECT_TRUE(engine_->books().HeldBy(6).empty());
  EXPECT_EQ(sessions_.Find(6), nullptr) << "no connection came for it";
  RunFor(20);
  EXPECT_EQ(TotalCommands(), 0u) << "what the old process ended is not ours to release";
}

}  // namespace
}  // namespace lw::engine_test
