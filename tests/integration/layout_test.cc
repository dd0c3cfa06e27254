// Marked readers and native claims (docs/safety.md §7, "Marked readers"), with real agents over
// real masters: read holds mark the resource's key; once every agent of the fleet marks them
// (for max_ttl_ms), a plain exclusive acquire is a SET NX PX per master, which a marked read
// hold still refuses; an agent that does not mark (mark_readers = false, as builds before the
// setting) keeps the fleet on the claim script, and its arrival turns native claims off.

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "metrics_util.h"
#include "support/agent_process.h"
#include "support/redis_cluster.h"
#include "test_util.h"

namespace lw::test::layout {
namespace {

using nlohmann::json;

// Heartbeats every second, and max_ttl_ms (how long every agent must have marked readers
// before claims go native) of 3 s: the switch comes within seconds.
std::vector<std::string> Flags(bool mark_readers = true, const char* heartbeat_ttl_ms = "3000") {
  return {"--heartbeat-ttl-ms", heartbeat_ttl_ms, "--max-ttl-ms", "3000", "--default-ttl-ms",
          "3000", "--mark-readers", mark_readers ? "true" : "false"};
}

json Acquire(client::Client& c, const std::string& resource, bool shared, int64_t wait_ms = 0) {
  json request = {{"op", "acquire"}, {"resource", resource}, {"ttl_ms", 3'000},
                  {"wait_ms", wait_ms}, {"renew", true}};
  if (shared) request["shared"] = true;
  return c.Call(request);
}

class LayoutTest : public ::testing::Test {
 protected:
  static double Native(const AgentProcess& a) {
    return MetricNow(a.admin_port(), "lockwarden_native_claims");
  }
  static double Marks(const AgentProcess& a) {
    return MetricNow(a.admin_port(), "lockwarden_marks_readers");
  }
  // Commands of `command` that `a` sent and the masters answered, all masters together.
  double Sent(const AgentProcess& a, const std::string& command) const {
    double n = 0;
    for (int i = 0; i < cluster_.size(); ++i) {
      n += MetricNow(a.admin_port(), "lockwarden_master_requests_total",
                     {{"command", command},
                      {"master", "127.0.0.1:" + std::to_string(cluster_.port(i))}});
    }
    return n;
  }
  // Waits for `n` more heartbeats of `a` than it has written now.
  static void AwaitHeartbeats(const AgentProcess& a, int n) {
    const double from = MetricNow(a.admin_port(), "lockwarden_fleet_heartbeats_total");
    ASSERT_TRUE(Eventually(
        [&] { return MetricNow(a.admin_port(), "lockwarden_fleet_heartbeats_total") >= from + n; },
        milliseconds(30'000)))
        << a.Log();
  }
  // The value at the resource's key on every master ("" where there is none).
  std::vector<std::string> AtKey(const std::string& resource) const {
    std::vector<std::string> out;
    for (int i = 0; i < cluster_.size(); ++i) {
      out.push_back(cluster_.Get(i, KeyOf(resource)).value_or(""));
    }
    return out;
  }

  RedisCluster cluster_{3};
};

const std::vector<std::string> kMarked(3, "lockwarden:readers");
const std::vector<std::string> kNothing(3, "");

TEST_F(LayoutTest, PlainLocksGoNativeOnceEveryAgentMarksReadersWhichStillKeepWritersOut) {
  AgentProcess a(cluster_, Flags()), b(cluster_, Flags());
  EXPECT_EQ(Native(a), 0) << "not before the fleet has marked readers for max_ttl_ms";
  ASSERT_TRUE(Eventually([&] { return Native(a) == 1 && Native(b) == 1; }, milliseconds(30'000)))
      << a.Log() << b.Log();

  auto reader = a.Connect();
  const json read = Acquire(reader, "lt:r", /*shared=*/true);
  ASSERT_TRUE(read.value("ok", false)) << read;
  // On every master once each has answered (the grant needed only a quorum's answers).
  EXPECT_TRUE(Eventually([&] { return AtKey("lt:r") == kMarked; }, milliseconds(15'000)));

  // A native claim is refused by the mark; the script then finds the reader.
  auto writer = b.Connect();
  const double set_before = Sent(b, "set_nx"), script_before = Sent(b, "claim_exclusive");
  const json refused = Acquire(writer, "lt:r", /*shared=*/false);
  EXPECT_EQ(refused.value("error", ""), "timeout") << refused;
  EXPECT_NE(refused.value("message", "").find("readers hold it"), std::string::npos) << refused;
  // Every master answers the SET NX in the end; the script went at least to the quorum that
  // refused (a master whose SET answers once the round is decided gets none).
  EXPECT_TRUE(Eventually(
      [&] {
        return Sent(b, "set_nx") == set_before + 3 &&
               Sent(b, "claim_exclusive") >= script_before + 2;
      },
      milliseconds(15'000)))
      << Sent(b, "set_nx") - set_before << " SET NX, "
      << Sent(b, "claim_exclusive") - script_before << " scripts";
  EXPECT_LE(Sent(b, "claim_exclusive"), script_before + 3);

  // The last reader takes the mark with it; the next plain acquire is SET NX alone.
  ASSERT_TRUE(reader.Release("lt:r", read["token"]).value("ok", false));
  EXPECT_EQ(AtKey("lt:r"), kNothing);
  const double set_then = Sent(b, "set_nx"), script_then = Sent(b, "claim_exclusive");
  const json granted = Acquire(writer, "lt:r", /*shared=*/false);
  ASSERT_TRUE(granted.value("ok", false)) << granted;
  ASSERT_TRUE(Eventually([&] { return Sent(b, "set_nx") == set_then + 3; },
                         milliseconds(15'000)));
  EXPECT_EQ(Sent(b, "claim_exclusive"), script_then) << "no script for a free lock";
  const std::string token = granted["token"];
  EXPECT_TRUE(Eventually([&] { return cluster_.CountHoldingGrant(KeyOf("lt:r"), token) == 3; },
                         milliseconds(15'000)));

  // A reader elsewhere now waits for the writer, as ever.
  auto reader2 = a.Connect();
  EXPECT_EQ(Acquire(reader2, "lt:r", /*shared=*/true).value("error", ""), "timeout");
}

TEST_F(LayoutTest, AnAgentThatDoesNotMarkReadersKeepsTheFleetOnTheScriptAndItsArrivalEndsNative) {
  auto unmarked = std::make_unique<AgentProcess>(cluster_, Flags(/*mark_readers=*/false));
  AgentProcess marked(cluster_, Flags());
  // Long past max_ttl_ms (3 s) of heartbeats: still on the script while the other is there.
  AwaitHeartbeats(marked, 6);
  EXPECT_EQ(Native(marked), 0) << marked.Log();

  // Once the registry has listed it as unmarked for about 4/3 of a heartbeat ttl, its read
  // hold is unmarked; the marked agent's writer is refused by the script's check.
  ASSERT_TRUE(Eventually([&] { return Marks(*unmarked) == 0; }, milliseconds(30'000)))
      << unmarked->Log();
  auto reader = unmarked->Connect();
  ASSERT_TRUE(Acquire(reader, "lt:old", /*shared=*/true).value("ok", false));
  EXPECT_EQ(AtKey("lt:old"), kNothing);
  auto writer = marked.Connect();
  const double set_before = Sent(marked, "set_nx");
  EXPECT_EQ(Acquire(writer, "lt:old", /*shared=*/false).value("error", ""), "timeout");
  EXPECT_EQ(Sent(marked, "set_nx"), set_before) << "no native claim beside an unmarked agent";

  // It stops (leaving the registry at once): claims go native max_ttl_ms later.
  unmarked->Signal(SIGTERM);
  ASSERT_EQ(unmarked->WaitExit(milliseconds(15'000)), 0);
  unmarked.reset();
  ASSERT_TRUE(Eventually([&] { return Native(marked) == 1; }, milliseconds(30'000)))
      << marked.Log();
  ASSERT_TRUE(Acquire(writer, "lt:old", /*shared=*/false, 10'000).value("ok", false));

  // One that does not mark joins: native claims end at the next heartbeat that sees it.
  AgentProcess late(cluster_, Flags(/*mark_readers=*/false));
  ASSERT_TRUE(Eventually([&] { return Native(marked) == 0; }, milliseconds(15'000)))
      << marked.Log();
}

// An agent that does not mark readers, joining a fleet on native claims, marks its read holds
// until the other agents must have seen it listed as unmarked (about 4/3 of a heartbeat ttl:
// 80 s here), so that none of them grants a native claim beside an unmarked reader meanwhile.
TEST_F(LayoutTest, AnAgentThatDoesNotMarkReadersMarksThemUntilTheFleetHasSeenItSo) {
  AgentProcess marked(cluster_, Flags());
  ASSERT_TRUE(Eventually([&] { return Native(marked) == 1; }, milliseconds(30'000)))
      << marked.Log();

  AgentProcess late(cluster_, Flags(/*mark_readers=*/false, /*heartbeat_ttl_ms=*/"60000"));
  EXPECT_EQ(Marks(late), 1) << late.Log();
  auto reader = late.Connect();
  ASSERT_TRUE(Acquire(reader, "lt:late", /*shared=*/true).value("ok", false));
  EXPECT_EQ(cluster_.AwaitHolding(KeyOf("lt:late"), "lockwarden:readers", 3), 3)
      << "a read hold granted before the fleet saw its agent as unmarked is marked";
  auto writer = marked.Connect();
  EXPECT_EQ(Acquire(writer, "lt:late", /*shared=*/false).value("error", ""), "timeout");
  // Its arrival ends native claims all the same.
  ASSERT_TRUE(Eventually([&] { return Native(marked) == 0; }, milliseconds(15'000)))
      << marked.Log();
  EXPECT_EQ(Marks(late), 1) << "still within its wait";
}

}  // namespace
}  // namespace lw::test::layout
