#include "server/curve_downsample.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace spheret {
namespace {

// The indices one bucket [begin, end) of `values` keeps, appended to `kept` in index order.
void KeepBucket(const std::vector<double>& values, size_t begin, size_t end,
                std::vector<size_t>* kept) {
  size_t low = end, high = end, not_a_number = end;
  for (size_t i = begin; i < end; ++i) {
    const double value = values[i];
    if (std::isnan(value)) {
      if (not_a_number == end) not_a_number = i;
      continue;
    }
    if (low == end || value < values[low]) low = i;
    if (high == end || value > values[high]) high = i;
  }
  std::vector<size_t> bucket = {begin, end - 1};
  for (size_t i : {low, high, not_a_number}) {
    if (i != end) bucket.push_back(i);
  }
  std::sort(bucket.begin(), bucket.end());
  bucket.erase(std::unique(bucket.begin(), bucket.end()), bucket.end());
  kept->insert(kept->end(), bucket.begin(), bucket.end());
}

}  // namespace

absl::Status CheckMaxPoints(int64_t max_points) {
  if (max_points == 0 || max_points >= kPointsPerCurveBucket) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("max_points must be 0 (every point) or at least ",
                                                 kPointsPerCurveBucket, ", got ", max_points));
}

CurveRecord DownsampleCurve(CurveRecord curve, int64_t max_points) {
  const size_t size = curve.steps.size();
  if (max_points <= 0 || size <= static_cast<size_t>(max_points)) return curve;
  const int64_t buckets = std::max<int64_t>(1, max_points / kPointsPerCurveBucket);
  const int64_t first = curve.steps.front();
  const int64_t span = curve.steps.back() - first + 1;
  const int64_t width = (span + buckets - 1) / buckets;
  std::vector<size_t> kept;
  kept.reserve(static_cast<size_t>(buckets * kPointsPerCurveBucket));
  size_t begin = 0;
  while (begin < size) {
    const int64_t bucket = (curve.steps[begin] - first) / width;
    size_t end = begin + 1;
    while (end < size && (curve.steps[end] - first) / width == bucket) ++end;
    KeepBucket(curve.values, begin, end, &kept);
    begin = end;
  }
  CurveRecord out;
  out.trial_id = curve.trial_id;
  out.steps.reserve(kept.size());
  out.values.reserve(kept.size());
  for (size_t i : kept) {
    out.steps.push_back(curve.steps[i]);
    out.values.push_back(curve.values[i]);
  }
  return out;
}

}  // namespace spheret
