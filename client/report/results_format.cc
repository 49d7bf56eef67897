#include "client/report/results_format.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "client/report/geometry.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

const Aggregate* CellOf(const ResultTable& results, const std::string& row,
                        const std::string& scale, const std::string& metric) {
  auto by_row = results.cells.find(row);
  if (by_row == results.cells.end()) return nullptr;
  auto by_scale = by_row->second.find(scale);
  if (by_scale == by_row->second.end()) return nullptr;
  auto cell = by_scale->second.find(metric);
  return cell == by_scale->second.end() ? nullptr : &cell->second;
}

// "mean ± std [95% CI] (n)", "mean (1)" for one seed, "—" for none; a cell that left seeds out
// says so in place of n: "(2 of 3; 1 diverged at step 140)", "— (0 of 3; 3 failed)".
std::string CellText(const Aggregate* cell, int decimals) {
  if (cell == nullptr) return "—";
  if (cell->n == 0) return "— " + SeedCountText(cell->seeds);
  std::string text = FormatNumber(cell->mean, decimals);
  if (cell->n > 1) {
    text += " ± " + FormatNumber(cell->std, decimals) + " [" +
            FormatNumber(cell->ci_low, decimals) + ", " + FormatNumber(cell->ci_high, decimals) +
            "]";
  }
  return text + " " + SeedCountText(cell->seeds);
}

// CellText, or "n/a" for a diagnostic that the row's method does not record (NotApplicable).
std::string CellOrNotApplicable(const ResultTable& results, const ResultRowKey& row,
                                const std::string& scale, const std::string& metric, int decimals) {
  const Aggregate* cell = CellOf(results, row.label, scale, metric);
  if (cell == nullptr && NotApplicable(row, metric)) return "n/a";
  return CellText(cell, decimals);
}

// A note per row and column whose cells left seeds out, naming each seed and why (one note for
// the metrics of a cell that lost the same seeds), then one per confound.
std::vector<std::string> TableNotes(const ResultTable& results) {
  std::vector<std::string> notes;
  for (const ResultRowKey& row : results.rows) {
    for (const std::string& scale : results.scales) {
      for (const std::string& metric : results.metrics) {
        const Aggregate* cell = CellOf(results, row.label, scale, metric);
        if (cell == nullptr || cell->seeds.lost.empty()) continue;
        const std::string note = LostSeedsNote(row.label + " at " + scale, cell->seeds);
        if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
      }
    }
  }
  if (!notes.empty()) notes.insert(notes.begin(), "Seeds left out of the cells:");
  for (const std::string& sentence : ConfoundSentences(results.confounds)) {
    notes.push_back("Confound: " + sentence);
  }
  return notes;
}

// The confounds of a column as one CSV/JSON field ("" when none).
std::string ColumnConfounds(const ResultTable& results, const std::string& column) {
  auto found = results.column_confounds.find(column);
  return found == results.column_confounds.end() ? "" : ConfoundField(found->second);
}

// The paper's value for a cell: the column's data set and scale.
std::optional<double> PaperValue(const ResultFormatOptions& options, const ResultTable& results,
                                 const std::string& column, const ResultRowKey& row,
                                 const std::string& metric) {
  auto found = results.columns.find(column);
  const ResultColumn where =
      found == results.columns.end() ? ResultColumn{"", column} : found->second;
  return options.paper->Find(PaperDatasetOf(where.dataset, options.paper_dataset), where.scale,
                             row.method, row.p, metric);
}

std::string PaperText(const ResultFormatOptions& options, const ResultTable& results,
                      const std::string& column, const ResultRowKey& row,
                      const std::string& metric) {
  std::optional<double> value = PaperValue(options, results, column, row, metric);
  return value ? FormatNumber(*value, options.decimals) : "—";
}

// Marks the best and second mean of each column of `table` (one table column per (scale,
// metric) at `table_columns`), as RankColumn ranks them.
void MarkBest(const ResultTable& results,
              const std::vector<std::pair<std::string, std::string>>& columns,
              const std::vector<size_t>& table_columns, int decimals, Table* table) {
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto& [scale, metric] = columns[c];
    std::vector<std::optional<double>> means;
    for (const ResultRowKey& row : results.rows) {
      const Aggregate* cell = CellOf(results, row.label, scale, metric);
      means.push_back(cell != nullptr && cell->n > 0 ? std::optional<double>(cell->mean)
                                                     : std::nullopt);
    }
    const ColumnRanks ranks = RankColumn(means, HigherIsBetter(metric), decimals);
    for (size_t r : ranks.best) table->best.insert({r, table_columns[c]});
    for (size_t r : ranks.second) table->second.insert({r, table_columns[c]});
  }
  std::set<std::pair<size_t, size_t>> lossy;
  for (size_t c = 0; c < columns.size(); ++c) {
    for (size_t r = 0; r < results.rows.size(); ++r) {
      const Aggregate* cell =
          CellOf(results, results.rows[r].label, columns[c].first, columns[c].second);
      if (cell != nullptr && !cell->seeds.lost.empty()) lossy.insert({r, table_columns[c]});
    }
  }
  if (DaggerLossyMarks(lossy, table)) table->notes.push_back(kDaggerNote);
}

}  // namespace

ColumnRanks RankColumn(const std::vector<std::optional<double>>& values, bool higher_is_better,
                       int decimals) {
  // The values as printed: two means that print alike tie.
  std::vector<std::optional<double>> shown(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] && std::isfinite(*values[i])) {
      shown[i] = std::stod(FormatNumber(*values[i], decimals));
    }
  }
  const auto better = [&](double a, double b) { return higher_is_better ? a > b : a < b; };
  std::optional<double> best;
  for (const auto& v : shown) {
    if (v && (!best || better(*v, *best))) best = v;
  }
  std::optional<double> second;
  for (const auto& v : shown) {
    if (v && *v != *best && (!second || better(*v, *second))) second = v;
  }
  ColumnRanks ranks;
  for (size_t i = 0; i < shown.size(); ++i) {
    if (shown[i] && *shown[i] == *best) ranks.best.push_back(i);
    if (shown[i] && second && *shown[i] == *second) ranks.second.push_back(i);
  }
  return ranks;
}

bool HigherIsBetter(const std::string& metric) {
  return absl::EndsWith(metric, "/acc") || absl::EndsWith(metric, "/acc_norm");
}

std::string MetricLabel(const std::string& metric) {
  // The catalog's labels of the losses the tables show ("train loss", "val loss", "val ppl",
  // "loss spikes"); other step metrics keep their names, as the tables always printed them.
  for (const char* labelled : {protocol::kTrainLossAvg, protocol::kValLoss, protocol::kValPpl,
                               protocol::kTrainLossSpikes}) {
    if (metric == labelled) return std::string(protocol::MetricLabel(metric));
  }
  static const std::pair<const char*, const char*> kGeometry[] = {
      {"geometry/hidden_norm_last", "‖h‖ final"},
      {"geometry/hidden_norm_drift", "‖h‖ drift"},
      {"geometry/theta_mean", "θ mean"},
      {"geometry/theta_max", "θ max"},
      {"geometry/at_cap_percent", "% at cap"},
      {"geometry/alpha_mean", "α mean"},
      {"geometry/radial_mean", "radial share"},
      {"geometry/delta_sum_mean", "S = ΣΔ mean"},
      {"geometry/theta2_sum_mean", "A = Σθ² mean"},
      {"geometry/token_cos_max", "token cos max"},
      {"geometry/gate_layernorm_percent", "% gate LN"},
      {"geometry/gate_rmsnorm_percent", "% gate RMS"},
      {"geometry/gate_dyt_percent", "% gate DyT"},
      {"geometry/gate_identity_percent", "% gate id"}};
  for (const auto& [name, label] : kGeometry) {
    if (metric == name) return label;
  }
  if (metric.rfind(kZeroShotPrefix, 0) == 0) {  // zeroshot/hellaswag/acc_norm: hellaswag acc_norm %
    std::string label = metric.substr(std::string(kZeroShotPrefix).size());
    const size_t slash = label.find('/');
    if (slash != std::string::npos) label[slash] = ' ';
    const bool percent = absl::EndsWith(label, " acc") || absl::EndsWith(label, " acc_norm");
    return percent ? label + " %" : label;
  }
  return metric;
}

Table PivotTable(const ResultTable& results, const ResultFormatOptions& options) {
  Table table;
  table.header.push_back("method");
  const bool several = results.metrics.size() > 1;
  for (const std::string& scale : results.scales) {
    for (const std::string& metric : results.metrics) {
      const std::string name = several ? scale + " " + MetricLabel(metric) : scale;
      table.header.push_back(name);
      if (options.paper != nullptr) table.header.push_back(name + " (paper)");
    }
  }
  std::vector<std::pair<std::string, std::string>> columns;
  std::vector<size_t> table_columns;
  for (const ResultRowKey& row : results.rows) {
    std::vector<std::string> line = {row.label};
    for (const std::string& scale : results.scales) {
      for (const std::string& metric : results.metrics) {
        if (table.rows.empty()) {
          columns.emplace_back(scale, metric);
          table_columns.push_back(line.size());
        }
        line.push_back(CellOrNotApplicable(results, row, scale, metric, options.decimals));
        if (options.paper != nullptr) {
          line.push_back(PaperText(options, results, scale, row, metric));
        }
      }
    }
    table.rows.push_back(std::move(line));
  }
  table.notes = TableNotes(results);
  if (options.mark_best) MarkBest(results, columns, table_columns, options.decimals, &table);
  return table;
}

Table LongTable(const ResultTable& results, const ResultFormatOptions& options) {
  Table table;
  table.header = {"row",  "method", "p", "scale",    "metric",
                  "mean", "std",    "n", "ci95_low", "ci95_high"};
  table.numeric = {false, false, true, false, false, true, true, true, true, true};
  if (options.paper != nullptr) {
    table.header.push_back("paper");
    table.numeric.push_back(true);
  }
  // The seeds the cell was run with (n counted of them) and each one left out.
  // and what else differs between the rows of its column.
  table.header.insert(table.header.end(), {"n_total", "left_out", "confounds"});
  table.numeric.insert(table.numeric.end(), {true, false, false});
  for (const ResultRowKey& row : results.rows) {
    for (const std::string& scale : results.scales) {
      for (const std::string& metric : results.metrics) {
        const Aggregate* cell = CellOf(results, row.label, scale, metric);
        if (cell == nullptr) continue;
        std::vector<std::string> line = {row.label,
                                         row.method,
                                         row.p ? ExactNumber(*row.p) : "",
                                         scale,
                                         metric,
                                         ExactNumber(cell->mean),
                                         ExactNumber(cell->std),
                                         std::to_string(cell->n),
                                         ExactNumber(cell->ci_low),
                                         ExactNumber(cell->ci_high)};
        if (options.paper != nullptr) {
          std::optional<double> value = PaperValue(options, results, scale, row, metric);
          line.push_back(value ? ExactNumber(*value) : "");
        }
        line.push_back(std::to_string(cell->seeds.total()));
        line.push_back(LostSeedsText(cell->seeds));
        line.push_back(ColumnConfounds(results, scale));
        table.rows.push_back(std::move(line));
      }
    }
  }
  return table;
}

Table MetricColumnsTable(const ResultTable& results, const ResultFormatOptions& options) {
  Table table;
  table.header = {"method", "scale"};
  for (const std::string& metric : results.metrics) {
    table.header.push_back(MetricLabel(metric));
    if (options.paper != nullptr) table.header.push_back(MetricLabel(metric) + " (paper)");
  }
  for (const ResultRowKey& row : results.rows) {
    for (const std::string& scale : results.scales) {
      std::vector<std::string> line = {row.label, scale};
      bool any = false;
      for (const std::string& metric : results.metrics) {
        any = any || CellOf(results, row.label, scale, metric) != nullptr;
        line.push_back(CellOrNotApplicable(results, row, scale, metric, options.decimals));
        if (options.paper != nullptr) {
          line.push_back(PaperText(options, results, scale, row, metric));
        }
      }
      if (any) table.rows.push_back(std::move(line));
    }
  }
  table.notes = TableNotes(results);
  return table;
}

Table ResultsTableFor(const ResultTable& results, Format format,
                      const ResultFormatOptions& options) {
  if (format == Format::kCsv || format == Format::kJson) return LongTable(results, options);
  return PivotTable(results, options);
}

}  // namespace spheret::client
