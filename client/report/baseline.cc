#include "client/report/baseline.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/report/results_format.h"

namespace spheret::client {
namespace {

const Aggregate* CellAt(const ResultTable& results, const std::string& row,
                        const std::string& scale, const std::string& metric) {
  auto by_row = results.cells.find(row);
  if (by_row == results.cells.end()) return nullptr;
  auto by_scale = by_row->second.find(scale);
  if (by_scale == by_row->second.end()) return nullptr;
  auto cell = by_scale->second.find(metric);
  return cell == by_scale->second.end() ? nullptr : &cell->second;
}

// The figures of one comparison as table cells.
std::vector<std::string> ComparisonCells(const Difference& d, bool exact, int decimals) {
  const auto number = [&](double value) {
    return exact ? ExactNumber(value) : FormatNumber(value, decimals);
  };
  std::string p = ExactNumber(d.p);
  if (!exact && !std::isnan(d.p)) p = absl::StrFormat("%.3g", d.p);
  const bool known = !std::isnan(d.mean);
  return {known ? (d.paired ? "paired t" : "Welch t") : "needs 2 seeds each",
          std::to_string(d.n_a),
          std::to_string(d.n_b),
          number(d.mean),
          number(d.ci_low),
          number(d.ci_high),
          p,
          known && d.IncludesZero() ? "≈ 0" : ""};
}

}  // namespace

absl::StatusOr<size_t> FindBaselineRow(const ResultTable& results, const std::string& baseline) {
  std::vector<size_t> by_method;
  std::vector<std::string> labels;
  for (size_t r = 0; r < results.rows.size(); ++r) {
    if (results.rows[r].label == baseline) return r;
    if (results.rows[r].method == baseline) by_method.push_back(r);
    labels.push_back(results.rows[r].label);
  }
  if (by_method.size() == 1) return by_method[0];
  if (by_method.empty()) {
    return absl::NotFoundError(absl::StrCat("--baseline ", baseline, ": no such row; the rows are ",
                                            absl::StrJoin(labels, ", ")));
  }
  std::vector<std::string> rows;
  for (size_t r : by_method) rows.push_back(results.rows[r].label);
  return absl::InvalidArgumentError(absl::StrCat("--baseline ", baseline, " has ", rows.size(),
                                                 " rows (", absl::StrJoin(rows, ", "),
                                                 "): name one by its label"));
}

absl::StatusOr<Table> BaselineTable(const ResultTable& results, const std::string& baseline,
                                    Format format, int decimals) {
  absl::StatusOr<size_t> base = FindBaselineRow(results, baseline);
  if (!base.ok()) return base.status();
  const std::string& base_label = results.rows[*base].label;
  const bool exact = format == Format::kCsv || format == Format::kJson;
  Table table;
  table.header = {"row",        "scale",    "metric",    "test", "n",         "n " + base_label,
                  "difference", "ci95_low", "ci95_high", "p",    "includes 0"};
  table.numeric = {false, false, false, false, true, true, true, true, true, true, false};
  for (const ResultRowKey& row : results.rows) {
    if (row.label == base_label) continue;
    for (const std::string& scale : results.scales) {
      for (const std::string& metric : results.metrics) {
        const Aggregate* ours = CellAt(results, row.label, scale, metric);
        const Aggregate* theirs = CellAt(results, base_label, scale, metric);
        if (ours == nullptr || theirs == nullptr) continue;
        std::vector<std::string> line = {row.label, scale, exact ? metric : MetricLabel(metric)};
        for (std::string& cell :
             ComparisonCells(CompareOverSeeds(ours->samples, theirs->samples), exact, decimals)) {
          line.push_back(std::move(cell));
        }
        table.rows.push_back(std::move(line));
      }
    }
  }
  return table;
}

}  // namespace spheret::client
