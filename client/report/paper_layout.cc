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
std::string CorpusOf(const TrialConfig& config, const std::string& sweep_name) {
  const std::string dataset = config.KnobText("dataset");
  return PaperDatasetOf(dataset, PaperDatasetOf(sweep_name, dataset));
}

namespace paper {
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

// The keys that tell the paper's rows apart, and those that only ask for zero-shot evaluation
// (TrainingOf): neither is a confound.
std::set<std::string> PaperIdentity() {
  std::set<std::string> keys = DefaultIdentityKeys();
  keys.insert({"eval_tasks", "eval_data", "eval_every"});
  return keys;
}

}  // namespace

bool HasZeroShot(const TrialResult& trial) {
  return std::any_of(trial.values.begin(), trial.values.end(),
                     [](const auto& value) { return value.first.rfind(kZeroShotPrefix, 0) == 0; });
}

// The trials an output reads: all for Tables 2-3; its corpus's for Figures 2-3; for Tables 4-5
// those of its corpus that were or are to be evaluated (every trial of the corpus when none was:
// its note then says so).
std::vector<const PaperTrial*> TrialsFor(const PaperOutputSpec& spec,
                                         const std::vector<PaperTrial>& trials) {
  std::vector<const PaperTrial*> read;
  const std::string& corpus = spec.corpus;
  const bool scores = spec.layout == PaperLayout::kZeroShot;
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

}  // namespace paper

using paper::Place;
using paper::Placed;
using paper::PlacedConfounds;
using paper::TrialsFor;

absl::StatusOr<std::vector<int64_t>> FigureTrials(PaperOutput output,
                                                  const std::vector<PaperTrial>& trials) {
  std::vector<std::string> left_out;
  SPHERET_ASSIGN_OR_RETURN(const std::vector<Placed> placed,
                           Place(TrialsFor(PaperOutputSpecOf(output), trials), &left_out));
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
                           Place(TrialsFor(PaperOutputSpecOf(output), trials), &left_out));
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
