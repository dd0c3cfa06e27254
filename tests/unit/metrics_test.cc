// Metrics and Activity: how restart quarantine shows in the exposition and the event list.

#include "observe/metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "observe/activity.h"
#include "redis/node_stats.h"

namespace lw {
namespace {

using std::chrono::milliseconds;

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(Metrics, QuarantinedMasterIsUpButOutOfTheMargin) {
  Metrics m({"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, {"0.1.0", "abc"});
  NodeStats first(m.registry(), "10.0.0.1:6379");
  NodeStats second(m.registry(), "10.0.0.2:6379");
  second.quarantined.Set(1);
  StateSample s;
  s.masters = 3;
  s.masters_up = 3;
  s.masters_usable = 2;
  s.quorum = 2;
  m.SetState(s);
  std::string text = m.Serialize();
  EXPECT_TRUE(Has(text, "lockwarden_master_quarantined{master=\"10.0.0.2:6379\"} 1")) << text;
  EXPECT_TRUE(Has(text, "lockwarden_master_quarantined{master=\"10.0.0.1:6379\"} 0"));
  EXPECT_TRUE(Has(text, "lockwarden_quorum_margin 0"));
  EXPECT_TRUE(Has(text, "lockwarden_masters_up 3"));
  second.quarantined.Set(0);
  text = m.Serialize();
  EXPECT_TRUE(Has(text, "lockwarden_master_quarantined{master=\"10.0.0.2:6379\"} 0"));
}

TEST(Metrics, OldestWaitIsThisAgentsLongestQueuedAcquireInSeconds) {
  Metrics m({"10.0.0.1:6379"}, {"0.1.0", "abc"});
  EXPECT_TRUE(Has(m.Serialize(), "lockwarden_oldest_wait_seconds 0")) << "none before a sample";
  StateSample s;
  s.waiters = 2;
  s.oldest_wait_ms = 2'500;
  m.SetState(s);
  EXPECT_TRUE(Has(m.Serialize(), "lockwarden_oldest_wait_seconds 2.5")) << m.Serialize();
  m.SetState(StateSample{});
  EXPECT_TRUE(Has(m.Serialize(), "lockwarden_oldest_wait_seconds 0"));
}

TEST(Activity, QuarantineStartAndEndAreEvents) {
  Metrics m({"10.0.0.1:6379"}, {"0.1.0", "abc"});
  EventLog events;
  Activity activity(
      events, [](uint64_t) { return std::string("pid 1"); },
      [t = int64_t{1'700'000'000'000}]() mutable { return t += 1000; });
  NodeEvents& node = activity.Node(0, "10.0.0.1:6379");
  node.QuarantineEntered("started 3.0s ago; may have forgotten locks", milliseconds(57'000));
  node.QuarantineLeft();
  const auto recent = events.Recent();  // newest first
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[1].kind, "master_quarantined");
  EXPECT_EQ(recent[1].severity, Severity::kWarning);
  EXPECT_EQ(recent[1].message,
            "master 10.0.0.1:6379 is quarantined for 57.0s (its votes do not count toward "
            "quorum): started 3.0s ago; may have forgotten locks");
  EXPECT_EQ(recent[0].kind, "master_quarantine_ended");
  EXPECT_EQ(recent[0].severity, Severity::kInfo);
}

}  // namespace
}  // namespace lw
