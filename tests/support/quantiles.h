#pragma once
// Quantiles two ways: as Prometheus's histogram_quantile estimates them from a classic
// histogram's buckets, and as the exact quantile of the samples themselves. Shared by the unit
// test of the bucket layouts and the integration test that checks them on a live agent.

#include <vector>

namespace lw::test {

// One `_bucket` series: its `le` bound (+Inf for the last) and the count of observations
// <= le (cumulative, as exposed).
struct CumulativeBucket {
  double le = 0;
  double count = 0;
};

// histogram_quantile(q, <the buckets of one histogram>) as Prometheus 2.42 evaluates it
// (promql/quantile.go, bucketQuantile): buckets sorted by le and equal bounds merged, counts
// made non-decreasing; NaN without a +Inf bucket, with fewer than 2 buckets or no observation;
// rank = q * total; the first bucket whose cumulative count is >= rank holds the quantile, which
// is interpolated linearly between the bucket's lower bound (the previous le, or 0 for the
// first bucket) and its le; in the +Inf bucket, the largest finite le is returned; a first
// bucket with le <= 0 returns its le. q < 0: -Inf; q > 1: +Inf; NaN q: NaN.
double HistogramQuantile(double q, std::vector<CumulativeBucket> buckets);

// The buckets a histogram with `bounds` (ascending, without +Inf) exposes after observing
// `samples`: a sample counts in every bucket whose bound is >= it (as prometheus-cpp and every
// Prometheus client count), and in the +Inf bucket appended last.
std::vector<CumulativeBucket> Bucketize(const std::vector<double>& bounds,
                                        const std::vector<double>& samples);

// The exact q-quantile of `samples` by nearest rank: the ceil(q * n)-th smallest (the smallest
// for q * n <= 1). This is the definition histogram_quantile approximates: with rank q * n, the
// bucket it picks (the first whose cumulative count c satisfies c >= rank, counts being whole
// numbers) is the one holding the ceil(q * n)-th smallest observation. So the estimate and this
// quantile lie in one bucket (a, b], and differ by less than b - a. NaN for no samples.
double SampleQuantile(double q, std::vector<double> samples);

}  // namespace lw::test
