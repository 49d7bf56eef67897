#include "client/report/paper_layout.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/report/paper_columns.h"
#include "client/report/results_format.h"
#include "config/method_registry.h"

namespace spheret::client {
namespace {

using paper::ColumnLabel;
using paper::kAccuracyColumns;
using paper::PaperRow;
using paper::Placed;
using paper::RowOf;
using paper::ZeroShotColumns;

// The value of `metric` for one trial: the stored value, or for the average the mean of the ten
// accuracies when the trial has all of them.
std::optional<double> ValueOf(const TrialResult& trial, const std::string& metric) {
  if (metric == kAverageAccuracy) {
    double sum = 0;
    for (size_t i = 0; i < kAccuracyColumns; ++i) {
      auto found = trial.values.find(ZeroShotColumns()[i].metric);
      if (found == trial.values.end() || !std::isfinite(found->second)) return std::nullopt;
      sum += found->second;
    }
    return sum / kAccuracyColumns;
  }
  if (metric == "val/ppl" && !trial.values.count(metric)) {  // older runs logged only the loss
    auto loss = trial.values.find("val/loss");
    if (loss != trial.values.end() && std::isfinite(loss->second)) return std::exp(loss->second);
  }
  auto found = trial.values.find(metric);
  if (found == trial.values.end() || !std::isfinite(found->second)) return std::nullopt;
  return found->second;
}

bool HasZeroShot(const TrialResult& trial) {
  return std::any_of(trial.values.begin(), trial.values.end(),
                     [](const auto& value) { return value.first.rfind(kZeroShotPrefix, 0) == 0; });
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

}  // namespace

std::string CorpusOf(const TrialConfig& config, const std::string& sweep_name) {
  const std::string dataset = config.KnobText("dataset");
  return PaperDatasetOf(dataset, PaperDatasetOf(sweep_name, dataset));
}

namespace {

// A config without the keys that only ask for zero-shot evaluation: two trials equal under it
// trained the same model (a zero-shot sweep beside a loss sweep).
nlohmann::json TrainingOf(const TrialConfig& config) {
  nlohmann::json object = config.object();
  for (const char* key : {"eval_tasks", "eval_data", "eval_every"}) object.erase(key);
  return object;
}

// Whether a trial was (or is to be) scored zero-shot.
bool Evaluated(const PaperTrial& trial) {
  return HasZeroShot(trial.result) || !trial.result.config.KnobText("eval_tasks").empty();
}

// The trials an output reads: all for Tables 2-3; its corpus's for Figures 2-3; for Tables 4-5
// those of its corpus that were or are to be evaluated (every trial of the corpus when none was:
// its note then says so).
std::vector<const PaperTrial*> TrialsFor(PaperOutput output,
                                         const std::vector<PaperTrial>& trials) {
  std::vector<const PaperTrial*> read;
  const std::string corpus = PaperOutputCorpus(output);
  const bool scores = output == PaperOutput::kTable4 || output == PaperOutput::kTable5;
  for (const PaperTrial& trial : trials) {
    if (corpus.empty() || (trial.corpus == corpus && (!scores || Evaluated(trial)))) {
      read.push_back(&trial);
    }
  }
  if (!corpus.empty() && read.empty()) {
    for (const PaperTrial& trial : trials) {
      if (trial.corpus == corpus) read.push_back(&trial);
    }
  }
  return read;
}

// Places each trial in its row; trials of other methods are left out (said in `left_out`). Two
// SUCCEEDED trials of one cell and seed count once when they trained the same model, else they
// are an error naming both.
absl::StatusOr<std::vector<Placed>> Place(const std::vector<const PaperTrial*>& trials,
                                          std::vector<std::string>* left_out) {
  std::vector<Placed> placed;
  std::map<std::string, const PaperTrial*> filled;  // row|corpus|scale|seed -> trial
  std::vector<int64_t> repeats;  // trials whose training another trial of their cell had
  for (const PaperTrial* trial : trials) {
    const TrialConfig& config = trial->result.config;
    const std::optional<std::string> row = RowOf(config);
    if (!row) {
      const std::string p = config.KnobText("p");
      const std::string method =
          config.Find("method") == nullptr ? "" : RowMethodOf(config.object());  // scripted:STEM
      left_out->push_back(absl::StrCat("trial ", trial->result.trial_id, " (", method,
                                       p.empty() ? "" : " p=", p,
                                       "): not a row of the paper's tables"));
      continue;
    }
    Placed placing{trial, *row, config.KnobText("scale"), SeedOf(config)};
    if (placing.scale.empty()) placing.scale = "custom";
    if (trial->result.state == TrialState::kSucceeded) {
      const std::string key =
          absl::StrCat(*row, "|", trial->corpus, "|", placing.scale, "|", placing.seed);
      auto [it, inserted] = filled.emplace(key, trial);
      if (!inserted) {
        const int64_t first = it->second->result.trial_id;
        const int64_t second = trial->result.trial_id;
        if (TrainingOf(it->second->result.config).dump() != TrainingOf(config).dump()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "trials ", first, " and ", second, " both fill ", *row, " at ", trial->corpus, " ",
              placing.scale, " with seed ", placing.seed,
              " but trained differently (an "
              "ablation varies another knob): give the sweeps that hold each cell once"));
        }
        repeats.push_back(second);
        continue;
      }
    }
    placed.push_back(placing);
  }
  if (!repeats.empty()) {
    left_out->push_back(
        absl::StrCat(repeats.size(),
                     " trial(s) trained exactly as an earlier trial of their cell and seed "
                     "(only zero-shot evaluation differs), counted once: trials ",
                     absl::StrJoin(repeats, ", ")));
  }
  return placed;
}

// The seeds of a cell's trials that `counted` leaves out. Where no seed has the value and every
// trial finished, nothing is lost (the "–" note says what the row lacks).
SeedAccount AccountCell(const std::vector<const Placed*>& in_cell,
                        const std::vector<int64_t>& counted) {
  std::vector<SeedRun> runs;
  bool unfinished = false;
  for (const Placed* p : in_cell) {
    runs.push_back(SeedRunOf(p->trial->result, p->seed));
    unfinished = unfinished || p->trial->result.state != TrialState::kSucceeded;
  }
  return counted.empty() && !unfinished ? SeedAccount{} : AccountSeeds(runs, counted);
}

// The keys that tell the paper's rows apart, and those that only ask for zero-shot evaluation
// (TrainingOf): neither is a confound.
std::set<std::string> PaperIdentity() {
  std::set<std::string> keys = DefaultIdentityKeys();
  keys.insert({"eval_tasks", "eval_data", "eval_every"});
  return keys;
}

// The confounds of the placed trials' rows, over every column (`column` of a trial: its corpus
// and scale, or its scale alone), and by column.
std::vector<Confound> PlacedConfounds(const std::vector<Placed>& placed, bool with_corpus,
                                      std::map<std::string, std::vector<Confound>>* by_column) {
  std::vector<nlohmann::json> configs;  // without the evaluation's keys, which do not resolve alone
  for (const Placed& p : placed) configs.push_back(TrainingOf(p.trial->result.config));
  std::map<std::string, std::vector<ConfoundTrial>> columns;
  std::vector<ConfoundTrial> all;
  for (size_t i = 0; i < placed.size(); ++i) {
    const std::string column =
        with_corpus ? placed[i].trial->corpus + " " + placed[i].scale : placed[i].scale;
    all.push_back({placed[i].row, column, &configs[i]});
    columns[column].push_back(all.back());
  }
  std::vector<Confound> confounds = FindConfounds(all, PaperIdentity());
  for (const auto& [column, trials] : columns) {
    if (!confounds.empty()) (*by_column)[column] = FindConfounds(trials, PaperIdentity());
  }
  return confounds;
}

// Fills one cell from the placed trials, or says why it is "–" (`what`: the column in notes).
PaperCell FillCell(const PaperCell& column, const PaperRow& row, const std::string& what,
                   const std::vector<Placed>& placed, const PaperTableOptions& options) {
  PaperCell cell = column;
  cell.row = row.name;
  std::vector<double> values;
  std::vector<const PaperTrial*> all;
  std::vector<const Placed*> in_cell;
  std::vector<int64_t> counted;
  bool corpus_seen = false, scale_seen = false, scale_scored = false;
  for (const Placed& p : placed) {
    if (p.trial->corpus != cell.corpus) continue;
    corpus_seen = true;
    if (p.scale != cell.scale) continue;
    scale_seen = true;
    scale_scored = scale_scored || HasZeroShot(p.trial->result);
    if (p.row != cell.row) continue;
    all.push_back(p.trial);
    in_cell.push_back(&p);
    if (p.trial->result.state != TrialState::kSucceeded) continue;
    if (std::optional<double> value = ValueOf(p.trial->result, cell.metric)) {
      values.push_back(*value);
      counted.push_back(p.seed);
      cell.trial_ids.push_back(p.trial->result.trial_id);
    }
  }
  cell.stats = Describe(values);
  cell.seeds = AccountCell(in_cell, counted);
  if (options.paper != nullptr && cell.metric != kAverageAccuracy) {
    cell.paper = options.paper->Find(cell.corpus, cell.scale, row.method, row.p, cell.metric);
  }
  if (!values.empty()) return cell;
  const bool zero_shot = cell.metric.rfind(kZeroShotPrefix, 0) == 0;
  // A SUCCEEDED trial with no zero-shot score at all was not evaluated: one note for its row (or
  // for the whole table when no trial of its corpus and scale was), not one per column.
  bool unscored = zero_shot, any_succeeded = false;
  for (const PaperTrial* trial : all) {
    if (trial->result.state != TrialState::kSucceeded) continue;
    any_succeeded = true;
    unscored = unscored && !HasZeroShot(trial->result);
  }
  if (!corpus_seen) {
    cell.missing = absl::StrCat("– ", cell.corpus, ": no trial in the given sweeps");
  } else if (!scale_seen) {
    cell.missing =
        absl::StrCat("– ", cell.corpus, " ", cell.scale, ": no trial in the given sweeps");
  } else if (zero_shot && !scale_scored) {
    cell.missing = absl::StrCat("– ", cell.corpus, " ", cell.scale,
                                ": no trial of the given sweeps has zero-shot scores (a sweep's "
                                "eval: block or spheret-lm eval scores them; docs/zero-shot.md)");
  } else {
    const std::string lacks = unscored ? "zero-shot scores" : what;
    cell.missing = absl::StrCat("– ", cell.row, " at ", cell.corpus, " ", cell.scale,
                                any_succeeded && !unscored ? ", " + what : "", ": ",
                                MissingReason(all, lacks));
  }
  return cell;
}

}  // namespace

absl::StatusOr<PaperTableData> BuildPaperTable(PaperOutput output,
                                               const std::vector<PaperTrial>& trials,
                                               const PaperTableOptions& options) {
  if (IsPaperFigure(output)) {
    return absl::InvalidArgumentError(PaperOutputName(output) + " is a figure, not a table");
  }
  PaperTableData data;
  SPHERET_ASSIGN_OR_RETURN(const std::vector<Placed> placed,
                           Place(TrialsFor(output, trials), &data.left_out));
  std::vector<ColumnLabel> labels;
  const std::vector<PaperCell> columns = paper::Columns(output, placed, &labels);
  data.title = paper::TitleOf(output, columns);
  data.header = data.short_header = {"method"};
  for (const ColumnLabel& label : labels) {
    data.header.push_back(label.full);
    data.short_header.push_back(label.short_label);
  }
  data.groups = paper::GroupsOf(output, columns);
  std::set<std::string> said;
  for (const PaperRow& row : paper::PaperRows()) {
    data.rows.push_back(row.name);
    for (size_t c = 0; c < columns.size(); ++c) {
      data.cells.push_back(FillCell(columns[c], row, labels[c].what, placed, options));
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
  std::vector<std::string> about = {absl::StrCat(
      data.title,
      ". Each cell: mean ± standard deviation [95% Student t interval] (n seeds) "
      "over SUCCEEDED trials (a cell that left seeds out says \"(counted of run; why)\", e.g. "
      "\"(2 of 3; 1 diverged at step 140)\", and a note names each seed); the best of "
      "each column in bold (* in plain text), the second underlined (+) (↑ higher is "
      "better, ↓ lower; means compared as printed, ties share a mark).")};
  if (output == PaperOutput::kTable4 || output == PaperOutput::kTable5) {
    about.push_back(
        "Accuracies in percent, perplexities as they are (lm-evaluation-harness's metrics). "
        "Avg. acc is ours, not the paper's: the mean of the ten accuracy columns per trial, then "
        "over seeds.");
  }
  if (options.paper != nullptr) about.push_back("[paper X]: the value the paper publishes.");
  data.notes.insert(data.notes.begin(), about.begin(), about.end());
  for (const std::string& line : data.left_out) data.notes.push_back("Left out: " + line);
  data.confounds = PlacedConfounds(placed, /*with_corpus=*/true, &data.column_confounds);
  for (const std::string& sentence : ConfoundSentences(data.confounds)) {
    data.notes.push_back("Confound: " + sentence);
  }
  return data;
}

absl::StatusOr<std::vector<int64_t>> FigureTrials(PaperOutput output,
                                                  const std::vector<PaperTrial>& trials) {
  std::vector<std::string> left_out;
  SPHERET_ASSIGN_OR_RETURN(const std::vector<Placed> placed,
                           Place(TrialsFor(output, trials), &left_out));
  std::vector<int64_t> ids;
  for (const Placed& p : placed) {
    // The lines average the trials the tables count: a FAILED run's curve stops where it
    // crashed, and counted it would draw a row whose cells are "–" and make the mean jump.
    if (p.trial->result.state == TrialState::kSucceeded) ids.push_back(p.trial->result.trial_id);
  }
  return ids;
}

absl::StatusOr<FigureSeeds> FigureSeedsOf(PaperOutput output,
                                          const std::vector<PaperTrial>& trials) {
  std::vector<std::string> left_out;
  SPHERET_ASSIGN_OR_RETURN(const std::vector<Placed> placed,
                           Place(TrialsFor(output, trials), &left_out));
  std::map<std::string, std::vector<SeedRun>> runs;
  std::map<std::string, std::vector<int64_t>> drawn;  // the seeds drawn, as FigureTrials
  FigureSeeds figure;
  for (const Placed& p : placed) {
    const std::string cell = absl::StrCat(p.row, " at ", p.scale);
    runs[cell].push_back(SeedRunOf(p.trial->result, p.seed));
    if (p.trial->result.state != TrialState::kSucceeded) continue;
    drawn[cell].push_back(p.seed);
    figure.cell_of[p.trial->result.trial_id] = cell;
  }
  for (const auto& [cell, cell_runs] : runs) {
    SeedAccount account = AccountSeeds(cell_runs, drawn[cell]);
    if (account.lost.empty()) continue;
    figure.notes.push_back(LostSeedsNote(cell, account));
    figure.seeds[cell] = std::move(account);
  }
  std::map<std::string, std::vector<Confound>> by_scale;
  for (const std::string& sentence :
       ConfoundSentences(PlacedConfounds(placed, /*with_corpus=*/false, &by_scale))) {
    figure.notes.push_back("Confound: " + sentence);
  }
  for (const auto& [scale, confounds] : by_scale)
    figure.confounds[scale] = ConfoundField(confounds);
  return figure;
}

}  // namespace spheret::client
