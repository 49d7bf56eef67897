#include "client/report/baseline.h"

#include <algorithm>
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

// What else differs between a row's and the baseline's trials at `scale`, beyond the table's
// row identity (the baseline's values first).
std::vector<Confound> PairConfounds(const ResultTable& results, const std::string& row,
                                    const std::string& base, const std::string& scale) {
  std::vector<ConfoundTrial> trials;
  for (const std::string& label : {base, row}) {
    auto by_row = results.configs.find(label);
    if (by_row == results.configs.end()) continue;
    auto configs = by_row->second.find(scale);
    if (configs == by_row->second.end()) continue;
    for (const TrialConfig& config : configs->second)
      trials.push_back({label, scale, &config.object()});
  }
  return FindConfounds(trials, results.identity_keys);
}

// `note` under the table, once.
void AddNote(const std::string& note, std::vector<std::string>* notes) {
  if (std::find(notes->begin(), notes->end(), note) == notes->end()) notes->push_back(note);
}

void AddLostNote(const std::string& where, const Aggregate& cell, std::vector<std::string>* notes) {
  if (!cell.seeds.lost.empty()) AddNote(LostSeedsNote(where, cell.seeds), notes);
}

// What the two cells of a comparison left out: "keel: 2 of 3; 1 diverged at step 140" per side
// that lost seeds, "" when neither did.
std::string LostText(const std::string& row, const Aggregate& ours, const std::string& base,
                     const Aggregate& theirs) {
  std::vector<std::string> parts;
  const auto add = [&](const std::string& label, const Aggregate& cell) {
    if (cell.seeds.lost.empty()) return;
    const std::string count = SeedCountText(cell.seeds);  // "(2 of 3; ...)"
    parts.push_back(label + ": " + count.substr(1, count.size() - 2));
  };
  add(row, ours);
  add(base, theirs);
  return absl::StrJoin(parts, "; ");
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
  // The seeds each side was run with and the ones its mean leaves out.
  if (exact) {
    table.header.insert(table.header.end(), {"n_total", "n_total " + base_label, "left_out",
                                             "left_out " + base_label, "confounds"});
    table.numeric.insert(table.numeric.end(), {true, true, false, false, false});
  } else {
    table.header.push_back("seeds left out");
  }
  for (const ResultRowKey& row : results.rows) {
    if (row.label == base_label) continue;
    for (const std::string& scale : results.scales) {
      const std::vector<Confound> confounds = PairConfounds(results, row.label, base_label, scale);
      for (const std::string& sentence : ConfoundSentences(confounds)) {
        AddNote(absl::StrCat("Confound of ", row.label, " vs ", base_label, " at ", scale, ": ",
                             sentence),
                &table.notes);
      }
      for (const std::string& metric : results.metrics) {
        const Aggregate* ours = CellAt(results, row.label, scale, metric);
        const Aggregate* theirs = CellAt(results, base_label, scale, metric);
        if (ours == nullptr || theirs == nullptr) continue;
        std::vector<std::string> line = {row.label, scale, exact ? metric : MetricLabel(metric)};
        for (std::string& cell :
             ComparisonCells(CompareOverSeeds(ours->samples, theirs->samples), exact, decimals)) {
          line.push_back(std::move(cell));
        }
        if (exact) {
          line.insert(
              line.end(),
              {std::to_string(ours->seeds.total()), std::to_string(theirs->seeds.total()),
               LostSeedsText(ours->seeds), LostSeedsText(theirs->seeds), ConfoundField(confounds)});
        } else {
          line.push_back(LostText(row.label, *ours, base_label, *theirs));
          AddLostNote(row.label + " at " + scale, *ours, &table.notes);
          AddLostNote(base_label + " at " + scale, *theirs, &table.notes);
        }
        table.rows.push_back(std::move(line));
      }
    }
  }
  return table;
}

}  // namespace spheret::client
