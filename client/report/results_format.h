// Tables of aggregated results in the paper's layouts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/report/results.h"
#include "client/report/table.h"

namespace spheret::client {

struct ResultFormatOptions {
  const PaperNumbers* paper = nullptr;  // non-null: put the published numbers beside ours
  std::string paper_dataset = "FineWeb-Edu";
  int decimals = 3;
  bool mark_best = true;  // PivotTable: each column's best mean in bold, the second underlined
};

// Accuracies (".../acc", ".../acc_norm"): higher is better; losses, perplexities, bits: lower.
bool HigherIsBetter(const std::string& metric);

// The rows of one column that the paper marks: the best value (bold) and the second (underlined).
// Values compare as printed with `decimals` places, so rows that print alike tie and share the
// mark; the second is the next value after the best (none when every value ties). Missing and
// non-finite values are never marked.
struct ColumnRanks {
  std::vector<size_t> best;
  std::vector<size_t> second;
};
ColumnRanks RankColumn(const std::vector<std::optional<double>>& values, bool higher_is_better,
                       int decimals);

// Rows = method (with p), columns = scale (× metric when there are several): "mean ± std
// [95% CI] (n)", or "(2 of 3; 1 diverged at step 140)" for a cell that left seeds out. With paper
// numbers, each scale column is followed by the paper's value. Notes: the seeds left out, the
// dagger on a marked cell that lost seeds, and each confound ("Confound: rows also differ in
// scalenorm: on for ...; off for ..."). MetricColumnsTable has the same notes.
Table PivotTable(const ResultTable& results, const ResultFormatOptions& options);

// One line per row, scale and metric: label, method, p, scale, metric, mean, std, n, ci95_low,
// ci95_high [, paper], n_total (the seeds run), left_out ("seed 3 (trial 6) diverged at step
// 140; ..."), confounds (ConfoundField of the column), numbers at full precision (CSV and JSON).
Table LongTable(const ResultTable& results, const ResultFormatOptions& options);

// Rows = method and scale, columns = metric (the zero-shot tables' layout).
Table MetricColumnsTable(const ResultTable& results, const ResultFormatOptions& options);

// PivotTable for the text formats, LongTable for CSV and JSON.
Table ResultsTableFor(const ResultTable& results, Format format,
                      const ResultFormatOptions& options);

// "train loss" for train/loss_avg, "val loss", "val ppl"; other names as they are.
std::string MetricLabel(const std::string& metric);

}  // namespace spheret::client
