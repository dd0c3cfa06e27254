// Elections (agent/elections.h) against fake masters: a leader granted through the engine is
// read from every master, observers get the first reading as their answer and later changes
// as events in term order, and observations are bounded per session and end with it.

#include "agent/elections.h"

#include <nlohmann/json.hpp>

#include "engine_test_support.h"

namespace lw::engine_test {
namespace {

AcquireKind CampaignFor(std::string payload) {
  return {.shape = LockShape{LockKind::kElection}, .shared = false, .hold_as = 0,
          .payload = std::move(payload)};
}

class ElectionsTest : public LockEngineTest {
 protected:
  void DestroyUsers() override {
    elections_.reset();
    LockEngineTest::DestroyUsers();
  }
  void MakeElections(size_t max_observed = 64) {
    MakeEngine();
    ElectionOptions o;
    o.poll_ms = 600'000;  // events come from announcements here, never from polling
    o.max_observed_per_session = max_observed;
    o.stats = &election_stats_;
    elections_ = std::make_unique<Elections>(
        &loop_, NodePtrs(), sessions_, o,
        [this](SessionId s, std::string line) { pushed_.emplace_back(s, std::move(line)); });
  }
  LeaderReading ReadNow(const std::string& name) {
    std::optional<LeaderReading> out;
    elections_->Read(name, [&](const LeaderReading& r) { out = r; });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out.value_or(LeaderReading{});
  }
  AcquireRecord* Lead(SessionId session, const std::string& name, const std::string& payload) {
    AcquireRecord* rec = Acquire(session, name, 10000, 3000, false, false, CampaignFor(payload));
    EXPECT_TRUE(RunUntil([rec] { return rec->calls > 0; }));
    EXPECT_TRUE(rec->granted()) << rec->Describe();
    return rec;
  }
  // Events pushed to `session` so far, as JSON.
  std::vector<nlohmann::json> EventsOf(SessionId session) const {
    std::vector<nlohmann::json> out;
    for (const auto& [s, line] : pushed_) {
      if (s == session) out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  stats::Registry election_registry_;
  ElectionStats election_stats_{election_registry_};
  SessionTable sessions_;  // outlives elections_, which keeps observations in it
  std::unique_ptr<Elections> elections_;
  std::vector<std::pair<SessionId, std::string>> pushed_;
};

TEST_F(ElectionsTest, TheLeaderIsReadFromAQuorumOfMastersWithItsTermAndPayload) {
  MakeElections();
  EXPECT_EQ(ReadNow("jobs").state, LeaderReading::State::kNone);
  Lead(1, "jobs", R"({"value":"a"})");
  const LeaderReading r = ReadNow("jobs");
  ASSERT_EQ(r.state, LeaderReading::State::kLeader);
  EXPECT_EQ(r.record.term, 1);
  EXPECT_EQ(r.record.payload, R"({"value":"a"})");
  EXPECT_EQ(r.answered, kNodes);
  // Two masters stop answering: three still decide it; three stopped: nobody can tell.
  node(3).Hold();
  node(4).Hold();
  EXPECT_EQ(ReadNow("jobs").state, LeaderReading::State::kLeader);
  node(2).Hold();
  EXPECT_EQ(ReadNow("jobs").state, LeaderReading::State::kUnknown);
}

TEST_F(ElectionsTest, ObserversGetTheFirstReadingAndThenEachChangeInTermOrder) {
  MakeElections();
  AcquireRecord* first = Lead(1, "jobs", R"({"value":"a"})");
  std::optional<std::variant<LeaderReading, Failure>> answer;
  ASSERT_FALSE(elections_->Observe(7, "jobs", [&](const auto& r) { answer = r; }));
  ASSERT_TRUE(RunUntil([&] { return answer.has_value(); }));
  ASSERT_TRUE(std::holds_alternative<LeaderReading>(*answer));
  EXPECT_EQ(std::get<LeaderReading>(*answer).record.term, 1);
  ASSERT_NE(sessions_.Find(7), nullptr);
  EXPECT_FALSE(sessions_.Find(7)->idle()) << "an observing session is never idle";

  AcquireRecord* second = Acquire(2, "jobs", 10000, 3000, false, false, CampaignFor("{}"));
  Release(1, "jobs", first->grant().token);
  ASSERT_TRUE(RunUntil([second] { return second->calls > 0; }));
  ASSERT_TRUE(second->granted()) << second->Describe();
  elections_->Announced(Key("jobs"));  // what the release watch hears
  ASSERT_TRUE(RunUntil([&] { return !EventsOf(7).empty(); }));
  const nlohmann::json event = EventsOf(7).back();
  EXPECT_EQ(event.value("event", ""), "leader") << event.dump();
  EXPECT_EQ(event.value("term", 0), 2) << event.dump();
  EXPECT_TRUE(pushed_.size() == EventsOf(7).size()) << "only the observer is told";
}

TEST_F(ElectionsTest, ObservationsAreBoundedPerSessionAndEndWithIt) {
  MakeElections(/*max_observed=*/1);
  std::optional<std::variant<LeaderReading, Failure>> answer;
  ASSERT_FALSE(elections_->Observe(7, "a", [&](const auto& r) { answer = r; }));
  const auto refused = elections_->Observe(7, "b", [](const auto&) {});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, ErrorCode::kTooMany);
  EXPECT_THAT(refused->message, ::testing::HasSubstr("max_observations_per_session"));
  ASSERT_TRUE(RunUntil([&] { return answer.has_value(); }));
  EXPECT_TRUE(elections_->Unobserve(7, "a"));
  EXPECT_FALSE(elections_->Unobserve(7, "a"));
  ASSERT_FALSE(elections_->Observe(7, "b", [](const auto&) {}));
  elections_->CloseSession(7);
  EXPECT_FALSE(elections_->Unobserve(7, "b")) << "closing the session ended its observation";
  EXPECT_TRUE(sessions_.Find(7)->idle());
}

}  // namespace
}  // namespace lw::engine_test
