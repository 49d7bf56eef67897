#include "client/report/paper_layout.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/report/results_format.h"

namespace spheret::client {
namespace {

// The paper's rows: method ids (p for p_spheret), in its order, with its names.
struct PaperRow {
  const char* method;
  std::optional<double> p;
  const char* name;
};
const std::vector<PaperRow>& PaperRows() {
  static const std::vector<PaperRow> rows = {
      {"pre_ln", std::nullopt, "Pre-LN"},
      {"pre_dyt", std::nullopt, "Pre-DyT"},
      {"peri_ln", std::nullopt, "Peri-LN"},
      {"keel", std::nullopt, "Keel"},
      {"geonorm", std::nullopt, "GeoNorm"},
      {"p_spheret", 0.5, "p-SpheretNorm (p=0.5)"},
      {"p_spheret", 1.0, "p-SpheretNorm (p=1)"},
      {"p_spheret", 2.0, "p-SpheretNorm (p=2)"}};
  return rows;
}

// A column: its metric and header label.
struct PaperColumn {
  std::string metric;
  std::string label;
};

// Tables 4-5's columns in the paper's order, then our average.
const std::vector<PaperColumn>& ZeroShotColumns() {
  static const std::vector<PaperColumn> columns = {
      {"zeroshot/arc_challenge/acc_norm", "ARC-C acc_n ↑"},
      {"zeroshot/arc_easy/acc_norm", "ARC-E acc_n ↑"},
      {"zeroshot/boolq/acc", "BoolQ acc ↑"},
      {"zeroshot/hellaswag/acc_norm", "HellaSwag acc_n ↑"},
      {"zeroshot/lambada_openai/acc", "LAMBADA acc ↑"},
      {"zeroshot/openbookqa/acc_norm", "OBQA acc_n ↑"},
      {"zeroshot/piqa/acc_norm", "PIQA acc_n ↑"},
      {"zeroshot/sciq/acc", "SciQ acc ↑"},
      {"zeroshot/social_iqa/acc", "SocialIQa acc ↑"},
      {"zeroshot/winogrande/acc", "WinoGrande acc ↑"},
      {"zeroshot/lambada_openai/perplexity", "LAMBADA ppl ↓"},
      {"zeroshot/wikitext/word_perplexity", "WikiText ppl ↓"},
      {kAverageAccuracy, "Avg. acc ↑ (ours)"}};
  return columns;
}
constexpr size_t kAccuracyColumns = 10;  // the first ten zero-shot columns are accuracies

// The paper's row of a trial's config: proj_spheret and cay_spheret are p_spheret at p = 1, 2.
std::optional<std::string> RowOf(const TrialConfig& config) {
  const std::string method = config.KnobText("method");
  std::optional<double> p;
  if (method == "proj_spheret") p = 1.0;
  if (method == "cay_spheret") p = 2.0;
  if (method == "p_spheret") {
    const nlohmann::json* value = config.Find("p");
    p = value != nullptr && value->is_number() ? value->get<double>() : 1.0;
  }
  const std::string id = p ? "p_spheret" : method;
  for (const PaperRow& row : PaperRows()) {
    if (id == row.method && row.p == p) return std::string(row.name);
  }
  return std::nullopt;
}

int64_t SeedOf(const TrialConfig& config) {
  const nlohmann::json* seed = config.Find("seed");
  return seed != nullptr && seed->is_number_integer() ? seed->get<int64_t>() : 1337;
}

// The trials of the table, placed: row name, corpus, scale.
struct Placed {
  const PaperTrial* trial;
  std::string row;
  std::string scale;
  int64_t seed;
};

// Preset order (xs, s-cpu, d12-cpu, S, M, L); the paper's S, M and L whenever one is present.
std::vector<std::string> ScalesOf(const std::vector<Placed>& placed) {
  std::vector<std::string> scales;
  for (const Placed& p : placed) {
    if (std::find(scales.begin(), scales.end(), p.scale) == scales.end()) scales.push_back(p.scale);
  }
  const bool paper = std::any_of(scales.begin(), scales.end(), [](const std::string& s) {
    return s == "S" || s == "M" || s == "L";
  });
  if (paper) {
    for (const char* s : {"S", "M", "L"}) {
      if (std::find(scales.begin(), scales.end(), s) == scales.end()) scales.push_back(s);
    }
  }
  SortScales(&scales);
  return scales;
}

// The paper's corpora first (always both), then any other, by name.
std::vector<std::string> CorporaOf(const std::vector<Placed>& placed) {
  std::vector<std::string> corpora = {kFineWebEdu, kOpenWebText};
  std::set<std::string> others;
  for (const Placed& p : placed) {
    if (p.trial->corpus != kFineWebEdu && p.trial->corpus != kOpenWebText) {
      others.insert(p.trial->corpus);
    }
  }
  corpora.insert(corpora.end(), others.begin(), others.end());
  return corpora;
}

// Tables 4-5 show the L models; where no trial of the corpus is at L (the CPU twins), the
// largest scale its trials have.
std::string ZeroShotScale(const std::vector<Placed>& placed, const std::string& corpus) {
  std::vector<std::string> scales;
  for (const Placed& p : placed) {
    if (p.trial->corpus == corpus) scales.push_back(p.scale);
  }
  if (scales.empty() || std::find(scales.begin(), scales.end(), "L") != scales.end()) return "L";
  SortScales(&scales);
  return scales.back();
}

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
    if (loss != trial.values.end()) return std::exp(loss->second);
  }
  auto found = trial.values.find(metric);
  if (found == trial.values.end() || !std::isfinite(found->second)) return std::nullopt;
  return found->second;
}

bool HasZeroShot(const TrialResult& trial) {
  return std::any_of(trial.values.begin(), trial.values.end(), [](const auto& value) {
    return value.first.rfind(kZeroShotPrefix, 0) == 0;
  });
}

// Why a cell has no value: the trials that would fill it and their states, or none given.
std::string MissingReason(const std::vector<const PaperTrial*>& all, const std::string& label) {
  std::vector<std::string> parts;
  for (const PaperTrial* trial : all) {
    parts.push_back(trial->result.state == "SUCCEEDED"
                        ? absl::StrCat("trial ", trial->result.trial_id, " has no ", label)
                        : absl::StrCat("trial ", trial->result.trial_id, " is ",
                                       trial->result.state));
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

// The columns of a table: corpus x scale x metric for Tables 2-3, the zero-shot columns at one
// corpus and scale for Tables 4-5.
std::vector<PaperCell> Columns(PaperOutput output, const std::vector<Placed>& placed,
                               std::vector<std::string>* labels) {
  std::vector<PaperCell> columns;
  const auto add = [&](const std::string& corpus, const std::string& scale,
                       const std::string& metric, const std::string& label) {
    PaperCell column;
    column.corpus = corpus;
    column.scale = scale;
    column.metric = metric;
    columns.push_back(column);
    labels->push_back(label);
  };
  if (output == PaperOutput::kTable2 || output == PaperOutput::kTable3) {
    for (const std::string& corpus : CorporaOf(placed)) {
      for (const std::string& scale : ScalesOf(placed)) {
        const std::string at = corpus + " " + scale;
        if (output == PaperOutput::kTable2) {
          add(corpus, scale, "train/loss_avg", at + " train ↓");
          add(corpus, scale, "val/loss", at + " val ↓");
        } else {
          add(corpus, scale, "val/ppl", at + " ppl ↓");
        }
      }
    }
    return columns;
  }
  const std::string corpus = PaperOutputCorpus(output);
  const std::string scale = ZeroShotScale(placed, corpus);
  for (const PaperColumn& column : ZeroShotColumns()) {
    add(corpus, scale, column.metric, column.label);
  }
  return columns;
}

// Places each trial in its row; trials of other methods are left out (said in `left_out`), and
// two SUCCEEDED trials of one cell and seed are an error.
absl::StatusOr<std::vector<Placed>> Place(const std::vector<PaperTrial>& trials,
                                          std::vector<std::string>* left_out) {
  std::vector<Placed> placed;
  std::map<std::string, int64_t> filled;  // row|corpus|scale|seed -> trial id
  for (const PaperTrial& trial : trials) {
    const TrialConfig config(trial.result.config_json);
    const std::optional<std::string> row = RowOf(config);
    if (!row) {
      left_out->push_back(absl::StrCat("trial ", trial.result.trial_id, " (",
                                       config.KnobText("method"),
                                       "): not a row of the paper's tables"));
      continue;
    }
    Placed p{&trial, *row, config.KnobText("scale"), SeedOf(config)};
    if (p.scale.empty()) p.scale = "custom";
    if (trial.result.state == "SUCCEEDED") {
      const std::string key = absl::StrCat(*row, "|", trial.corpus, "|", p.scale, "|", p.seed);
      auto [it, inserted] = filled.emplace(key, trial.result.trial_id);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trials ", it->second, " and ", trial.result.trial_id, " both fill ", *row, " at ",
            trial.corpus, " ", p.scale, " with seed ", p.seed,
            ": give the sweeps that hold each cell once (an ablation varies another knob)"));
      }
    }
    placed.push_back(p);
  }
  return placed;
}

// Fills one cell from the placed trials, or says why it is "–".
PaperCell FillCell(const PaperCell& column, const PaperRow& row, const std::string& label,
                   const std::vector<Placed>& placed, const PaperTableOptions& options) {
  PaperCell cell = column;
  cell.row = row.name;
  std::vector<double> values;
  std::vector<const PaperTrial*> all;
  bool corpus_seen = false, scale_seen = false, scale_scored = false;
  for (const Placed& p : placed) {
    if (p.trial->corpus != cell.corpus) continue;
    corpus_seen = true;
    if (p.scale != cell.scale) continue;
    scale_seen = true;
    scale_scored = scale_scored || HasZeroShot(p.trial->result);
    if (p.row != cell.row) continue;
    all.push_back(p.trial);
    if (p.trial->result.state != "SUCCEEDED") continue;
    if (std::optional<double> value = ValueOf(p.trial->result, cell.metric)) {
      values.push_back(*value);
      cell.trial_ids.push_back(p.trial->result.trial_id);
    }
  }
  cell.stats = Describe(values);
  if (options.paper != nullptr && cell.metric != kAverageAccuracy) {
    cell.paper = options.paper->Find(cell.corpus, cell.scale, row.method, row.p, cell.metric);
  }
  if (!values.empty()) return cell;
  const bool zero_shot = cell.metric.rfind(kZeroShotPrefix, 0) == 0;
  // A SUCCEEDED trial with no zero-shot score at all was not evaluated: one note for its row (or
  // for the whole table when no trial of its corpus and scale was), not one per column.
  bool unscored = zero_shot, any_succeeded = false;
  for (const PaperTrial* trial : all) {
    if (trial->result.state != "SUCCEEDED") continue;
    any_succeeded = true;
    unscored = unscored && !HasZeroShot(trial->result);
  }
  if (!corpus_seen) {
    cell.missing = absl::StrCat("– ", cell.corpus, ": no trial in the given sweeps");
  } else if (!scale_seen) {
    cell.missing = absl::StrCat("– ", cell.corpus, " ", cell.scale, ": no trial in the given sweeps");
  } else if (zero_shot && !scale_scored) {
    cell.missing = absl::StrCat("– ", cell.corpus, " ", cell.scale,
                                ": no trial of the given sweeps has zero-shot scores (evaluate "
                                "them: a sweep's `eval:` or `spheret-lm eval`, docs/zero-shot.md)");
  } else {
    const std::string what = unscored ? "zero-shot scores" : label;
    cell.missing = absl::StrCat("– ", cell.row, " at ", cell.corpus, " ", cell.scale,
                                any_succeeded && !unscored ? ", " + label : "", ": ",
                                MissingReason(all, what));
  }
  return cell;
}

std::string TitleOf(PaperOutput output, const std::vector<PaperCell>& columns) {
  switch (output) {
    case PaperOutput::kTable2:
      return "Table 2: train and validation loss";
    case PaperOutput::kTable3:
      return "Table 3: validation perplexity";
    default:
      return absl::StrCat(output == PaperOutput::kTable4 ? "Table 4" : "Table 5",
                          ": zero-shot results of the ", columns.front().scale,
                          " models trained on ", columns.front().corpus);
  }
}

}  // namespace

absl::StatusOr<PaperTableData> BuildPaperTable(PaperOutput output,
                                               const std::vector<PaperTrial>& trials,
                                               const PaperTableOptions& options) {
  if (IsPaperFigure(output)) {
    return absl::InvalidArgumentError(PaperOutputName(output) + " is a figure, not a table");
  }
  PaperTableData data;
  SPHERET_ASSIGN_OR_RETURN(const std::vector<Placed> placed, Place(trials, &data.left_out));
  std::vector<std::string> labels;
  const std::vector<PaperCell> columns = Columns(output, placed, &labels);
  data.title = TitleOf(output, columns);
  data.header = {"method"};
  data.header.insert(data.header.end(), labels.begin(), labels.end());
  std::set<std::string> said;
  for (const PaperRow& row : PaperRows()) {
    data.rows.push_back(row.name);
    for (size_t c = 0; c < columns.size(); ++c) {
      data.cells.push_back(FillCell(columns[c], row, labels[c], placed, options));
      const std::string& missing = data.cells.back().missing;
      if (!missing.empty() && said.insert(missing).second) data.notes.push_back(missing);
    }
  }
  std::vector<std::string> about = {absl::StrCat(
      data.title, ". Each cell: mean ± standard deviation [95% Student t interval] (n seeds) "
                  "over SUCCEEDED trials; the best of each column in bold (* in plain text), the "
                  "second underlined (+) (↑ higher is better, ↓ lower; means compared as printed, "
                  "ties share a mark).")};
  if (output == PaperOutput::kTable4 || output == PaperOutput::kTable5) {
    about.push_back(
        "Accuracies in percent, perplexities as they are (lm-evaluation-harness's metrics). "
        "Avg. acc is ours, not the paper's: the mean of the ten accuracy columns per trial, then "
        "over seeds.");
  }
  if (options.paper != nullptr) about.push_back("[paper X]: the value the paper publishes.");
  data.notes.insert(data.notes.begin(), about.begin(), about.end());
  return data;
}

std::vector<int64_t> FigureTrials(PaperOutput output, const std::vector<PaperTrial>& trials) {
  std::vector<int64_t> ids;
  const std::string corpus = PaperOutputCorpus(output);
  for (const PaperTrial& trial : trials) {
    if (trial.corpus == corpus && RowOf(TrialConfig(trial.result.config_json))) {
      ids.push_back(trial.result.trial_id);
    }
  }
  return ids;
}

}  // namespace spheret::client
