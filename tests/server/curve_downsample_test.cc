// server/curve_downsample.h: curves for figures keep at most max_points of their own points, with
// every bucket's first, last, minimum, maximum and first NaN; short curves come back exact.
#include "server/curve_downsample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <utility>

namespace spheret {
namespace {

CurveRecord RandomWalk(int64_t first, int64_t points, uint32_t seed) {
  CurveRecord curve;
  curve.trial_id = 7;
  std::mt19937 rng(seed);
  std::normal_distribution<double> step(0.0, 0.01);
  double value = 5.0;
  for (int64_t i = 0; i < points; ++i) {
    curve.steps.push_back(first + i);
    value += step(rng);
    curve.values.push_back(value);
  }
  return curve;
}

std::map<int64_t, double> PointsOf(const CurveRecord& curve) {
  std::map<int64_t, double> points;
  for (size_t i = 0; i < curve.steps.size(); ++i) points[curve.steps[i]] = curve.values[i];
  return points;
}

// The documented buckets: B = max_points / 5 of ceil(span / B) steps from the first step.
int64_t BucketOf(const CurveRecord& curve, int64_t step, int64_t max_points) {
  const int64_t buckets = max_points / kPointsPerCurveBucket;
  const int64_t span = curve.steps.back() - curve.steps.front() + 1;
  return (step - curve.steps.front()) / ((span + buckets - 1) / buckets);
}

TEST(CurveDownsample, ShortCurvesAndZeroComeBackExact) {
  const CurveRecord curve = RandomWalk(0, 200, 1);
  for (int64_t max_points : {0, 200, 4000}) {
    const CurveRecord out = DownsampleCurve(curve, max_points);
    EXPECT_EQ(out.steps, curve.steps) << max_points;
    EXPECT_EQ(out.values, curve.values) << max_points;
    EXPECT_EQ(out.trial_id, 7);
  }
}

TEST(CurveDownsample, KeepsOwnPointsWithinBoundAndEveryBucketsExtremes) {
  const CurveRecord curve = RandomWalk(1, 50'000, 2);
  for (int64_t max_points : {5, 9, 100, 4000, 49'999}) {
    const CurveRecord out = DownsampleCurve(curve, max_points);
    ASSERT_LE(out.steps.size(), static_cast<size_t>(max_points));
    const int64_t buckets = BucketOf(curve, curve.steps.back(), max_points) + 1;
    ASSERT_GE(out.steps.size(), static_cast<size_t>(2 * buckets)) << "first and last of each";
    EXPECT_EQ(out.steps.front(), 1);
    EXPECT_EQ(out.steps.back(), 50'000);
    const std::map<int64_t, double> input = PointsOf(curve), kept = PointsOf(out);
    ASSERT_EQ(kept.size(), out.steps.size()) << "each point once";
    EXPECT_TRUE(std::is_sorted(out.steps.begin(), out.steps.end()));
    std::map<int64_t, std::pair<double, double>> kept_range, input_range;  // bucket -> min, max
    for (const auto& [step, value] : kept) {
      ASSERT_EQ(input.at(step), value) << "a kept point is the curve's own";
      auto [it, fresh] =
          kept_range.emplace(BucketOf(curve, step, max_points), std::make_pair(value, value));
      it->second = {std::min(it->second.first, value), std::max(it->second.second, value)};
    }
    for (const auto& [step, value] : input) {
      auto [it, fresh] =
          input_range.emplace(BucketOf(curve, step, max_points), std::make_pair(value, value));
      it->second = {std::min(it->second.first, value), std::max(it->second.second, value)};
    }
    EXPECT_EQ(kept_range, input_range)
        << "every bucket keeps its min and max, max_points " << max_points;
  }
}

TEST(CurveDownsample, KeepsASpikeADipAndTheStartOfEveryNaNRun) {
  CurveRecord curve = RandomWalk(0, 50'000, 3);
  curve.values[12'345] = 100.0;  // a loss spike
  curve.values[23'456] = -3.0;
  for (int64_t i = 30'000; i < 30'100; ++i) curve.values[i] = std::nan("");  // NULLs
  curve.values[40'001] = std::nan("");
  const CurveRecord out = DownsampleCurve(curve, 400);  // 80 buckets of 625 steps
  ASSERT_LE(out.steps.size(), 400u);
  const std::map<int64_t, double> kept = PointsOf(out);
  EXPECT_EQ(kept.at(12'345), 100.0);
  EXPECT_EQ(kept.at(23'456), -3.0);
  ASSERT_TRUE(kept.count(30'000)) << "the first NaN of the run";
  EXPECT_TRUE(std::isnan(kept.at(30'000)));
  ASSERT_TRUE(kept.count(40'001)) << "a lone NaN";
  EXPECT_TRUE(std::isnan(kept.at(40'001)));
  int nans = 0;
  for (const auto& [step, value] : kept) nans += std::isnan(value) ? 1 : 0;
  EXPECT_EQ(nans, 2) << "one per bucket that has NaN (30,000-30,099 lie in 30,000-30,624)";
}

TEST(CurveDownsample, AllNaNCurveKeepsItsBucketsEnds) {
  CurveRecord curve;
  for (int64_t step = 0; step < 1000; ++step) {
    curve.steps.push_back(step);
    curve.values.push_back(std::nan(""));
  }
  const CurveRecord out = DownsampleCurve(curve, 50);  // 10 buckets of 100 steps
  EXPECT_EQ(out.steps.size(), 20u);
  EXPECT_EQ(out.steps.front(), 0);
  EXPECT_EQ(out.steps[1], 99);
  EXPECT_EQ(out.steps.back(), 999);
}

TEST(CurveDownsample, SeedsWithTheSameStepsShareTheirBucketEnds) {
  const CurveRecord a = DownsampleCurve(RandomWalk(0, 20'000, 4), 1000);
  const CurveRecord b = DownsampleCurve(RandomWalk(0, 20'000, 5), 1000);
  std::set<int64_t> ends_a, ends_b;  // 200 buckets of 100 steps: steps 100k and 100k + 99
  for (int64_t step : a.steps) {
    if (step % 100 == 0 || step % 100 == 99) ends_a.insert(step);
  }
  for (int64_t step : b.steps) {
    if (step % 100 == 0 || step % 100 == 99) ends_b.insert(step);
  }
  EXPECT_EQ(ends_a.size(), 400u);
  EXPECT_EQ(ends_a, ends_b);
}

TEST(CurveDownsample, MaxPointsIsZeroOrAtLeastFive) {
  EXPECT_TRUE(CheckMaxPoints(0).ok());
  EXPECT_TRUE(CheckMaxPoints(5).ok());
  EXPECT_TRUE(CheckMaxPoints(4000).ok());
  for (int64_t bad : {1, 4, -1}) {
    const absl::Status status = CheckMaxPoints(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("max_points must be 0 (every point) or at least 5"),
              std::string::npos)
        << status.message();
  }
}

}  // namespace
}  // namespace spheret
