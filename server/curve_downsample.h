// Curves read for a figure (StreamCurvesRequest.max_points): a curve longer than max_points keeps
// at most max_points of its own points, chosen so that what a figure draws stays true.
//
// The rule: the curve's step range [first, last] is cut into B = max_points / 5 buckets of equal
// width in steps (ceil((last - first + 1) / B) steps each, from `first`); of each bucket's points
// it keeps the first and the last (by step), the one with the smallest and the one with the
// largest finite value (the earliest where several tie), and the first whose value is not a
// number (NaN: the trainer's non-finite value, stored as NULL). Kept points are the curve's own
// (step, value) pairs, never averages, in step order, each once: at most 5 a bucket. So every
// spike and every dip of a bucket is kept, as are the curve's ends and the start of every run of
// NaN; what is dropped lies within its bucket's kept minimum and maximum. Curves of one sweep
// with the same steps (every seed of a run) get the same buckets, so their firsts and lasts fall
// on the same steps. A curve of at most max_points points, or max_points 0, is returned exact.
// Tables, exports and statistics (final values, loss spikes) read exact curves (max_points 0).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "server/domain/records.h"

namespace spheret {

// Points a bucket keeps at most: first, last, minimum, maximum, first NaN.
inline constexpr int64_t kPointsPerCurveBucket = 5;

// OK for max_points 0 (every point) or at least kPointsPerCurveBucket; InvalidArgument naming
// max_points otherwise.
absl::Status CheckMaxPoints(int64_t max_points);

// `curve` (steps ascending, as the store reads them) reduced by the rule above to at most
// `max_points` points; unchanged when max_points is 0 or the curve has at most max_points points.
// max_points must pass CheckMaxPoints.
CurveRecord DownsampleCurve(CurveRecord curve, int64_t max_points);

}  // namespace spheret
