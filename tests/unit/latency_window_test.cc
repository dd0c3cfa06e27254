// Unit tests for src/redis/latency_window.h: p50/p99 over the last N round trips.

#include <gtest/gtest.h>

#include <chrono>

#include "redis/latency_window.h"

namespace lw {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(LatencyWindowTest, EmptyHasNoQuantiles) {
  LatencyWindow w;
  EXPECT_EQ(w.size(), 0u);
  EXPECT_FALSE(w.QuantileMs(0.5).has_value());
  EXPECT_FALSE(w.QuantileMs(0.99).has_value());
}

TEST(LatencyWindowTest, OneSampleIsEveryQuantile) {
  LatencyWindow w;
  w.Add(microseconds(250));
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.0), 0.25);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.5), 0.25);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.99), 0.25);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(1.0), 0.25);
}

TEST(LatencyWindowTest, NearestRankOnOneToOneHundred) {
  LatencyWindow w;
  // Added out of order: the window must not rely on arrival order.
  for (int i = 100; i >= 1; i -= 2) w.Add(milliseconds(i));
  for (int i = 1; i <= 99; i += 2) w.Add(milliseconds(i));
  ASSERT_EQ(w.size(), 100u);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.50), 50.0);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.99), 99.0);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(1.0), 100.0);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.0), 1.0);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.01), 1.0);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.011), 2.0);
}

TEST(LatencyWindowTest, P99SeesTheTailOfAMostlyFastMaster) {
  LatencyWindow w;
  for (int i = 0; i < 990; ++i) w.Add(microseconds(100));
  for (int i = 0; i < 10; ++i) w.Add(milliseconds(40));
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.50), 0.1);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.99), 0.1);  // rank 990 is still fast
  w.Add(milliseconds(40));                     // 11 slow of 1001: rank 991 is slow
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.99), 40.0);
}

TEST(LatencyWindowTest, QuantilesDoNotDisturbTheWindow) {
  LatencyWindow w(4);
  for (int ms : {4, 1, 3, 2}) w.Add(milliseconds(ms));
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.5), 2.0);
  w.Add(milliseconds(10));  // evicts the oldest (4), not whatever sorting moved to slot 0
  EXPECT_DOUBLE_EQ(*w.QuantileMs(1.0), 10.0);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.5), 2.0);  // {1, 3, 2, 10}
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.75), 3.0);
}

TEST(LatencyWindowTest, WraparoundKeepsOnlyTheLastN) {
  LatencyWindow w;
  ASSERT_EQ(LatencyWindow::kDefaultCapacity, 1024u);
  for (int i = 0; i < 1024; ++i) w.Add(milliseconds(500));  // an old bad spell
  for (int i = 0; i < 1024; ++i) w.Add(microseconds(200));  // then healthy
  EXPECT_EQ(w.size(), 1024u);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.99), 0.2);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(1.0), 0.2);
  w.Add(milliseconds(500));  // one slow among the last 1024: max only
  EXPECT_DOUBLE_EQ(*w.QuantileMs(1.0), 500.0);
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.99), 0.2);
}

TEST(LatencyWindowTest, SubMicrosecondPrecisionIsKept) {
  LatencyWindow w;
  w.Add(std::chrono::nanoseconds(37'500));
  EXPECT_DOUBLE_EQ(*w.QuantileMs(0.5), 0.0375);
}

}  // namespace
}  // namespace lw
