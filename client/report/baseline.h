// Each method against a baseline over seeds: is the difference real? Pure: no I/O.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "client/report/results.h"
#include "client/report/table.h"

namespace spheret::client {

// The row of `results` that `baseline` names: a row label (`pre_ln`, `p_spheret p=0.5`), or a
// method with one row. NotFound (listing the rows) or InvalidArgument (a method of several rows).
absl::StatusOr<size_t> FindBaselineRow(const ResultTable& results, const std::string& baseline);

// For every other row, column and metric: the difference of means row − baseline over seeds, its
// 95% interval and two-sided p-value (CompareOverSeeds: a paired t test when both cells hold the
// same seeds, Welch's otherwise), and "≈ 0" where the interval includes 0. Columns: row, scale,
// metric, test, n, n baseline, difference, ci95_low, ci95_high, p, includes 0, then what each side
// left out: text formats a column "seeds left out" ("keel: 2 of 3; 1 diverged at step 140") and a
// note per cell naming the seeds; CSV and JSON n_total, n_total BASE, left_out, left_out BASE. And
// what else differs between the two rows' trials at that scale beyond the table's row identity
// (confounds.h): a note per pair ("Confound of keel vs pre_ln at S: rows also differ in ..."),
// CSV and JSON a `confounds` field (ConfoundField).
// Text formats show `decimals` digits (p with 3 significant), CSV and JSON full precision.
absl::StatusOr<Table> BaselineTable(const ResultTable& results, const std::string& baseline,
                                    Format format, int decimals);

}  // namespace spheret::client
