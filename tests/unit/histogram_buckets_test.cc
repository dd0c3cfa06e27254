// The bucket layouts of the wait, hold and master latency histograms (docs/metrics.md,
// "Buckets"): histogram_quantile over them is within 10% of the true p50, p90 and p99 for any
// samples whose quantile lies between the first and the last bound; a 1, 2.5, 5 per decade
// layout is not, for contended waits (a cluster between 1 and 1.5 ms).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "locking/engine_stats.h"
#include "redis/node_stats.h"
#include "stats/stats.h"
#include "support/quantiles.h"

namespace lw::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kQuantiles[] = {0.5, 0.9, 0.99};

// 1, 2.5, 5 per decade (ratios up to 2.5), the layout the agent's histograms had before 8 per
// octave: the reference that fails.
const stats::Buckets kOldWaitBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                        1,      2.5,     5,      10,    30};

double RelativeError(double estimate, double truth) { return std::abs(estimate - truth) / truth; }

// Largest relative error of histogram_quantile over `bounds` for p50, p90 and p99 of `samples`,
// each of whose quantiles must lie in (bounds.front(), top] (the range the layout promises).
double WorstError(const stats::Buckets& bounds, double top, const std::vector<double>& samples,
                  const std::string& what) {
  const auto buckets = Bucketize(bounds, samples);
  double worst = 0;
  for (double q : kQuantiles) {
    const double truth = SampleQuantile(q, samples);
    EXPECT_GT(truth, bounds.front()) << what << " q=" << q;
    EXPECT_LE(truth, top) << what << " q=" << q;
    worst = std::max(worst, RelativeError(HistogramQuantile(q, buckets), truth));
  }
  return worst;
}

TEST(ExponentialBucketsTest, GeometricFromFirstToTheFirstBoundPastLastInFourDigits) {
  const stats::Buckets b = stats::ExponentialBuckets(0.0001, 8, 30);
  ASSERT_EQ(b.size(), 147u);  // 2^(146/8) * 100 us = 31.17 s is the first bound >= 30 s
  EXPECT_EQ(b.front(), 0.0001);
  EXPECT_EQ(b.back(), 31.17);
  EXPECT_LT(b[b.size() - 2], 30);
  for (size_t k = 0; k < b.size(); ++k) {
    const double exact = 0.0001 * std::exp2(static_cast<double>(k) / 8);
    EXPECT_LE(RelativeError(b[k], exact), 0.0005) << k;  // rounded, not moved
    char text[32];
    std::snprintf(text, sizeof text, "%.3e", b[k]);
    EXPECT_EQ(std::strtod(text, nullptr), b[k]) << k << ": more than 4 significant digits";
    if (k > 0) {
      EXPECT_GT(b[k] / b[k - 1], 1.0) << k;
      EXPECT_LE(b[k] / b[k - 1], 1.0914) << k << ": rounding widened a bucket past the bound";
    }
  }
  EXPECT_EQ(stats::ExponentialBuckets(1, 1, 1), stats::Buckets{1});
  EXPECT_EQ(stats::ExponentialBuckets(1, 1, 5), (stats::Buckets{1, 2, 4, 8}));
  EXPECT_THROW(stats::ExponentialBuckets(0, 8, 1), std::invalid_argument);
  EXPECT_THROW(stats::ExponentialBuckets(2, 8, 1), std::invalid_argument);
  EXPECT_THROW(stats::ExponentialBuckets(1, 0, 2), std::invalid_argument);
  EXPECT_THROW(stats::ExponentialBuckets(1, 8, std::numeric_limits<double>::infinity()),
               std::invalid_argument);
}

TEST(ExponentialBucketsTest, TheAgentsLayouts) {
  const stats::Buckets fine = stats::ExponentialBuckets(0.0001, 8, 30);
  stats::Buckets wait = fine;
  wait.insert(wait.end(), {60, 120, 300});  // up to max_wait_ms's default
  EXPECT_EQ(EngineStats::kWaitBuckets, wait);
  stats::Buckets hold = fine;
  hold.insert(hold.end(), {60, 300, 900, 1800, 3600});
  EXPECT_EQ(EngineStats::kHoldBuckets, hold);
  // node_timeout_ms is at most 10 s: every round trip the engine waits for is in range.
  EXPECT_EQ(NodeStats::kLatencyBuckets, stats::ExponentialBuckets(0.0001, 8, 10));
  EXPECT_EQ(NodeStats::kLatencyBuckets.size(), 134u);
  EXPECT_GE(NodeStats::kLatencyBuckets.back(), 10);
}

TEST(HistogramQuantileTest, FollowsPrometheusRules) {
  // Cumulative: 10 observations <= 1, 10 more in (1, 2], none above.
  const std::vector<CumulativeBucket> two = {{1, 10}, {2, 20}, {kInf, 20}};
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, two), 1.0);   // rank 10 reached by the first bucket
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.25, two), 0.5);  // the first bucket starts at 0
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, two), 1.5);
  EXPECT_DOUBLE_EQ(HistogramQuantile(1, two), 2.0);
  // Given in any order; one bound listed twice (two series of one histogram) counts once.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, {{kInf, 10}, {2, 10}, {1, 5}, {2, 10}, {1, 5}}),
                   1.5);
  // In the +Inf bucket: the largest finite bound.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.9, {{1, 5}, {kInf, 10}}), 1.0);
  // A count below an earlier one is raised to it.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, {{1, 10}, {2, 5}, {3, 20}, {kInf, 20}}), 1.0);
  // A first bound <= 0 is returned as it is.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.1, {{-1, 5}, {1, 10}, {kInf, 10}}), -1.0);
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{1, 5}, {2, 10}})));  // no +Inf bucket
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{1, 0}, {kInf, 0}})));  // nothing observed
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{kInf, 3}})));          // one bucket
  EXPECT_EQ(HistogramQuantile(-0.1, two), -kInf);
  EXPECT_EQ(HistogramQuantile(1.1, two), kInf);
}

TEST(HistogramQuantileTest, BucketizeAndSampleQuantile) {
  // A sample equal to a bound counts in that bound's bucket.
  const auto b = Bucketize({1, 2}, {0.5, 1, 1.5, 3});
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].count, 2);
  EXPECT_EQ(b[1].count, 3);
  EXPECT_EQ(b[2].le, kInf);
  EXPECT_EQ(b[2].count, 4);
  const std::vector<double> ten = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_EQ(SampleQuantile(0.5, ten), 5);
  EXPECT_EQ(SampleQuantile(0.9, ten), 9);
  EXPECT_EQ(SampleQuantile(0.99, ten), 10);
  EXPECT_EQ(SampleQuantile(0, ten), 1);
  EXPECT_TRUE(std::isnan(SampleQuantile(0.5, {})));
}

// Point masses everywhere in range: on every bound, just past it, and on a log grid between.
// A point mass just past a bound is the worst case: the estimate runs q of the way across a
// bucket whose lower end is the truth.
TEST(HistogramQuantileTest, PointMassesWithinTenPercentAcrossTheRange) {
  struct Layout {
    const char* name;
    const stats::Buckets& bounds;
    double top;
  };
  const Layout layouts[] = {{"wait", EngineStats::kWaitBuckets, 30},
                            {"hold", EngineStats::kHoldBuckets, 30},
                            {"master latency", NodeStats::kLatencyBuckets, 10}};
  for (const auto& layout : layouts) {
    std::vector<double> positions;
    for (size_t k = 1; k < layout.bounds.size() && layout.bounds[k] <= layout.top; ++k) {
      positions.push_back(layout.bounds[k]);
      positions.push_back(layout.bounds[k - 1] * (1 + 1e-9));
    }
    for (double p = 0.000101; p <= layout.top; p *= 1.0137) positions.push_back(p);
    double worst = 0;
    for (double p : positions) {
      worst = std::max(worst, WorstError(layout.bounds, layout.top, std::vector<double>(100, p),
                                         std::string(layout.name) + " at " + std::to_string(p)));
    }
    EXPECT_LT(worst, 0.1) << layout.name;
    std::printf("%s layout: worst relative error over %zu point masses %.4f\n", layout.name,
                positions.size(), worst);
  }
}

// Seeded spreads: narrow clusters (+-2%, +-10%) and wide ones (log-uniform over 1 and 3 decades,
// bimodal: fast grants plus slow ones queued behind holders) at centres across the range.
TEST(HistogramQuantileTest, SpreadsWithinTenPercentAcrossTheRange) {
  std::mt19937_64 rng(20240623);
  const double lo = 0.000101, hi = 30;
  const auto clamp = [&](double v) { return std::min(hi, std::max(lo, v)); };
  double worst = 0;
  int cases = 0;
  for (double centre = 0.00012; centre <= 25; centre *= 1.37) {
    for (double spread : {0.02, 0.1}) {
      std::uniform_real_distribution<double> u(centre * (1 - spread), centre * (1 + spread));
      std::vector<double> s(2000);
      for (double& v : s) v = clamp(u(rng));
      worst = std::max(worst, WorstError(EngineStats::kWaitBuckets, hi, s, "narrow"));
      ++cases;
    }
    for (double decades : {1.0, 3.0}) {
      std::uniform_real_distribution<double> e(std::log10(centre) - decades / 2,
                                               std::log10(centre) + decades / 2);
      std::vector<double> s(2000);
      for (double& v : s) v = clamp(std::pow(10, e(rng)));
      worst = std::max(worst, WorstError(EngineStats::kWaitBuckets, hi, s, "wide"));
      ++cases;
    }
    std::lognormal_distribution<double> fast(std::log(lo * 3), 0.3);
    std::lognormal_distribution<double> slow(std::log(centre), 0.5);
    std::bernoulli_distribution queued(0.3);
    std::vector<double> s(2000);
    for (double& v : s) v = clamp(queued(rng) ? slow(rng) : fast(rng));
    worst = std::max(worst, WorstError(EngineStats::kWaitBuckets, hi, s, "bimodal"));
    ++cases;
  }
  EXPECT_LT(worst, 0.1);
  std::printf("wait layout: worst relative error over %d seeded spreads %.4f\n", cases, worst);
}

// 16 clients on one resource: waits clustered between 1 and 1.5 ms (p50 near 1.0 ms, p99 near
// 1.4 ms). The decade layout has one bucket from 1 to 2.5 ms, so p90 and p99 are estimated far
// across it; 8 per octave tracks them.
TEST(HistogramQuantileTest, OldLayoutMissedTheContendedCluster) {
  std::mt19937_64 rng(16);
  std::normal_distribution<double> wait(0.00101, 0.00018);
  std::vector<double> s(4000);
  for (double& v : s) v = std::max(0.0002, wait(rng));
  const auto old_buckets = Bucketize(kOldWaitBuckets, s);
  const auto new_buckets = Bucketize(EngineStats::kWaitBuckets, s);
  for (double q : kQuantiles) {
    const double truth = SampleQuantile(q, s);
    const double old_estimate = HistogramQuantile(q, old_buckets);
    const double new_estimate = HistogramQuantile(q, new_buckets);
    std::printf("p%g: samples %.3f ms, old layout %.3f ms (%+.1f%%), new layout %.3f ms (%+.1f%%)\n",
                q * 100, truth * 1e3, old_estimate * 1e3, (old_estimate / truth - 1) * 100,
                new_estimate * 1e3, (new_estimate / truth - 1) * 100);
    EXPECT_LT(RelativeError(new_estimate, truth), 0.1) << q;
    if (q >= 0.9) {
      EXPECT_GT(RelativeError(old_estimate, truth), 0.5) << q;
    }
  }
}

}  // namespace
}  // namespace lw::test
