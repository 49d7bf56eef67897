// Building a paper table from its declaration (paper_tables.h): each cell's value over the
// placed trials (paper_layout.cc), the note of a "–" cell, the header and the table's notes.
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/report/paper_columns.h"
#include "client/report/paper_layout.h"

namespace spheret::client {
namespace {

using paper::AccountCell;
using paper::ColumnLabel;
using paper::HasZeroShot;
using paper::PaperRow;
using paper::Place;
using paper::Placed;
using paper::PlacedConfounds;
using paper::TrialsFor;

// A trial's finite value of `metric`.
std::optional<double> FiniteValue(const TrialResult& trial, const std::string& metric) {
  auto found = trial.values.find(metric);
  if (found == trial.values.end() || !std::isfinite(found->second)) return std::nullopt;
  return found->second;
}

// The value of a column for one trial, read as its declaration says (`accuracies`: the table's
// accuracy columns, for the mean of them).
std::optional<double> ValueOf(const TrialResult& trial, const PaperColumnSpec& column,
                              const std::vector<std::string>& accuracies) {
  if (column.reading == PaperReading::kMeanOfAccuracies) {
    double sum = 0;
    for (const std::string& accuracy : accuracies) {
      const std::optional<double> value = FiniteValue(trial, accuracy);
      if (!value) return std::nullopt;
      sum += *value;
    }
    return sum / static_cast<double>(accuracies.size());
  }
  if (column.reading == PaperReading::kElseExpValLoss && !trial.values.count(column.metric)) {
    if (const std::optional<double> loss = FiniteValue(trial, protocol::kValLoss)) {
      return std::exp(*loss);
    }
  }
  return FiniteValue(trial, column.metric);
}

// The table's accuracy columns: those read as they are whose higher values are better.
std::vector<std::string> AccuracyMetrics(const PaperOutputSpec& spec) {
  std::vector<std::string> metrics;
  for (const PaperColumnSpec& column : spec.columns) {
    if (column.reading == PaperReading::kLast &&
        PaperDirection(column) == protocol::Direction::kHigher) {
      metrics.push_back(column.metric);
    }
  }
  return metrics;
}

// Why a cell has no value: the trials that would fill it and their states, or none given.
std::string MissingReason(const std::vector<const PaperTrial*>& all, const std::string& label) {
  std::vector<std::string> parts;
  for (const PaperTrial* trial : all) {
    parts.push_back(trial->result.state == TrialState::kSucceeded
                        ? absl::StrCat("trial ", trial->result.trial_id, " has no ", label)
                        : absl::StrCat("trial ", trial->result.trial_id, " is ",
                                       TrialStateName(trial->result.state)));
  }
  if (parts.empty()) return "no trial in the given sweeps";
  return absl::StrJoin(parts, "; ");
}

// The placed trials of one cell and what was seen around it (for the note of a "–" cell).
struct CellTrials {
  std::vector<double> values;    // the counted values, one per SUCCEEDED trial that has one
  std::vector<int64_t> counted;  // their seeds
  std::vector<const PaperTrial*> all;
  std::vector<const Placed*> in_cell;
  bool corpus_seen = false, scale_seen = false, scale_scored = false;
};

// Reads one cell's trials among the placed (its value as `column` declares it).
CellTrials Gather(PaperCell* cell, const PaperColumnSpec& column,
                  const std::vector<std::string>& accuracies, const std::vector<Placed>& placed) {
  CellTrials found;
  for (const Placed& p : placed) {
    if (p.trial->corpus != cell->corpus) continue;
    found.corpus_seen = true;
    if (p.scale != cell->scale) continue;
    found.scale_seen = true;
    found.scale_scored = found.scale_scored || HasZeroShot(p.trial->result);
    if (p.row != cell->row) continue;
    found.all.push_back(p.trial);
    found.in_cell.push_back(&p);
    if (p.trial->result.state != TrialState::kSucceeded) continue;
    if (std::optional<double> value = ValueOf(p.trial->result, column, accuracies)) {
      found.values.push_back(*value);
      found.counted.push_back(p.seed);
      cell->trial_ids.push_back(p.trial->result.trial_id);
    }
  }
  return found;
}

// Why a cell is "–" (`what`: the column in notes).
std::string MissingNote(const PaperCell& cell, const CellTrials& found, const std::string& what) {
  const bool zero_shot = cell.metric.rfind(kZeroShotPrefix, 0) == 0;
  // A SUCCEEDED trial with no zero-shot score at all was not evaluated: one note for its row (or
  // for the whole table when no trial of its corpus and scale was), not one per column.
  bool unscored = zero_shot, any_succeeded = false;
  for (const PaperTrial* trial : found.all) {
    if (trial->result.state != TrialState::kSucceeded) continue;
    any_succeeded = true;
    unscored = unscored && !HasZeroShot(trial->result);
  }
  if (!found.corpus_seen) return absl::StrCat("– ", cell.corpus, ": no trial in the given sweeps");
  if (!found.scale_seen) {
    return absl::StrCat("– ", cell.corpus, " ", cell.scale, ": no trial in the given sweeps");
  }
  if (zero_shot && !found.scale_scored) {
    return absl::StrCat("– ", cell.corpus, " ", cell.scale,
                        ": no trial of the given sweeps has zero-shot scores (a sweep's "
                        "eval: block or spheret-lm eval scores them; docs/zero-shot.md)");
  }
  const std::string lacks = unscored ? "zero-shot scores" : what;
  return absl::StrCat("– ", cell.row, " at ", cell.corpus, " ", cell.scale,
                      any_succeeded && !unscored ? ", " + what : "", ": ",
                      MissingReason(found.all, lacks));
}

// Fills one cell from the placed trials, or says why it is "–".
PaperCell FillCell(const PaperCell& column, const ColumnLabel& label, const PaperRow& row,
                   const std::vector<std::string>& accuracies, const std::vector<Placed>& placed,
                   const PaperTableOptions& options) {
  PaperCell cell = column;
  cell.row = row.name;
  const CellTrials found = Gather(&cell, *label.spec, accuracies, placed);
  cell.stats = Describe(found.values);
  cell.seeds = AccountCell(found.in_cell, found.counted);
  // Our own columns (the mean of the accuracies) have no published value.
  if (options.paper != nullptr && label.spec->reading != PaperReading::kMeanOfAccuracies) {
    cell.paper = options.paper->Find(cell.corpus, cell.scale, row.method, row.p, cell.metric);
  }
  if (found.values.empty()) cell.missing = MissingNote(cell, found, label.what);
  return cell;
}

// What every table's notes begin with: what a cell is and how it is marked, then what the
// columns of a zero-shot table are and where the paper's values come from.
std::vector<std::string> AboutNotes(const PaperOutputSpec& spec, const std::string& title,
                                    const PaperTableOptions& options) {
  std::vector<std::string> about = {absl::StrCat(
      title,
      ". Each cell: mean ± standard deviation [95% Student t interval] (n seeds) "
      "over SUCCEEDED trials (a cell that left seeds out says \"(counted of run; why)\", e.g. "
      "\"(2 of 3; 1 diverged at step 140)\", and a note names each seed); the best of "
      "each column in bold (* in plain text), the second underlined (+) (↑ higher is "
      "better, ↓ lower; means compared as printed, ties share a mark).")};
  if (spec.layout == PaperLayout::kZeroShot) {
    about.push_back(
        "Accuracies in percent, perplexities as they are (lm-evaluation-harness's metrics). "
        "Avg. acc is ours, not the paper's: the mean of the ten accuracy columns per trial, then "
        "over seeds.");
  }
  if (options.paper != nullptr) about.push_back("[paper X]: the value the paper publishes.");
  return about;
}

// The table's header (one row, and the short one under the LaTeX groups) and its columns' facts.
void SetColumns(const PaperOutputSpec& spec, const std::vector<PaperCell>& columns,
                const std::vector<ColumnLabel>& labels, PaperTableData* data) {
  data->title = paper::TitleOf(spec, columns);
  data->header = data->short_header = {"method"};
  for (const ColumnLabel& label : labels) {
    data->header.push_back(label.full);
    data->short_header.push_back(label.short_label);
    data->directions.push_back(PaperDirection(*label.spec));
  }
  data->groups = paper::GroupsOf(spec, columns);
  data->decimals = spec.decimals;
}

}  // namespace

absl::StatusOr<PaperTableData> BuildPaperTable(PaperOutput output,
                                               const std::vector<PaperTrial>& trials,
                                               const PaperTableOptions& options) {
  return BuildPaperTable(PaperOutputSpecOf(output), trials, options);
}

absl::StatusOr<PaperTableData> BuildPaperTable(const PaperOutputSpec& spec,
                                               const std::vector<PaperTrial>& trials,
                                               const PaperTableOptions& options) {
  if (spec.layout == PaperLayout::kFigure) {
    return absl::InvalidArgumentError(spec.name + " is a figure, not a table");
  }
  PaperTableData data;
  SPHERET_ASSIGN_OR_RETURN(const std::vector<Placed> placed,
                           Place(TrialsFor(spec, trials), &data.left_out));
  std::vector<ColumnLabel> labels;
  const std::vector<PaperCell> columns = paper::Columns(spec, placed, &labels);
  SetColumns(spec, columns, labels, &data);
  const std::vector<std::string> accuracies = AccuracyMetrics(spec);
  std::set<std::string> said;
  for (const PaperRow& row : paper::PaperRows()) {
    data.rows.push_back(row.name);
    for (size_t c = 0; c < columns.size(); ++c) {
      data.cells.push_back(FillCell(columns[c], labels[c], row, accuracies, placed, options));
      const PaperCell& cell = data.cells.back();
      if (!cell.missing.empty() && said.insert(cell.missing).second) {
        data.notes.push_back(cell.missing);
      }
      // A "–" cell's note already names its trials and their states.
      if (cell.seeds.lost.empty() || cell.stats.n == 0) continue;
      const std::string lost =
          LostSeedsNote(absl::StrCat(cell.row, " at ", cell.corpus, " ", cell.scale), cell.seeds);
      if (said.insert(lost).second) data.notes.push_back(lost);
    }
  }
  const std::vector<std::string> about = AboutNotes(spec, data.title, options);
  data.notes.insert(data.notes.begin(), about.begin(), about.end());
  for (const std::string& line : data.left_out) data.notes.push_back("Left out: " + line);
  data.confounds = PlacedConfounds(placed, /*with_corpus=*/true, &data.column_confounds);
  for (const std::string& sentence : ConfoundSentences(data.confounds)) {
    data.notes.push_back("Confound: " + sentence);
  }
  return data;
}

}  // namespace spheret::client
