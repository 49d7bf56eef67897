// The packed form of a block of metric values (schema/0011_packed_scalars.sql): a JSON array of
// [step, value, wall_ms offset] per value, each value as the shortest text that reads back as the
// same double, null for NaN and infinities (stored as NULL, as Statement::Bind stores them).
// SQLite's json_each reads the same text (the `scalars` and `curves` views). Internal to
// server/store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace spheret::store {

struct PackedPoint {
  int64_t step = 0;
  double value = 0;  // NaN where none was stored
  int64_t wall_ms = 0;
};

// Appends the shortest text that reads back as `value` (std::to_chars); null for NaN and
// infinities, 0 for both zeros (SQLite stores -0.0 as the integer 0).
void AppendValue(double value, std::string* out);

// Appends the JSON array of `points` to `out`, each wall_ms as its offset from `wall_base`.
void EncodePoints(const std::vector<PackedPoint>& points, int64_t wall_base, std::string* out);

// Appends the points of a JSON array that EncodePoints (or migration 0011) wrote, each wall_ms
// `wall_base` plus its offset. InvalidArgument naming the offset of the first character that is
// not of that form.
absl::Status DecodePoints(std::string_view json, int64_t wall_base, std::vector<PackedPoint>* out);

}  // namespace spheret::store
