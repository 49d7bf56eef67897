// Final results of a sweep aggregated over seeds and pivoted like the paper: rows = method (with p
// and any other knob the sweep varies), columns = scale. Pure: no I/O, no RPC types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/report/confounds.h"
#include "client/report/seed_account.h"
#include "client/report/stats.h"
#include "config/trial_config.h"
#include "protocol/trial_states.h"

namespace spheret::client {

// One trial's final values: metric summaries' last values and zero-shot scores ("task/metric").
// Zero-shot scores are metrics named zeroshot/<task>/<metric>, accuracies in percent as in the
// paper's Tables 4-5 (perplexities and bits per byte as they are).
inline constexpr char kZeroShotPrefix[] = "zeroshot/";
// "zeroshot/hellaswag/acc_norm" for a stored eval score, and its value in the paper's units.
std::string ZeroShotMetricName(const std::string& task, const std::string& metric);
double ZeroShotDisplayValue(const std::string& metric, double value);
// The paper's column order of zero-shot metrics (its tasks' order, then acc before acc_norm).
void SortZeroShotMetrics(std::vector<std::string>* metrics);

struct TrialResult {
  int64_t trial_id = 0;
  TrialState state = TrialState::kPending;
  TrialConfig config;  // the resolved spheret-lm config, parsed where it entered the process
  std::map<std::string, double> values;
  std::string role{};  // "search", "confirm" (a search: block's trials) or ""
  // Where the trial stopped, for the cells that leave it out: a DIVERGED trial's step whose loss
  // diverged (its trainer's `diverged` event), else the latest step of the metrics fetched; -1
  // when unknown.
  int64_t stop_step = -1;
  bool stop_step_exact = false;  // stop_step is the diverged event's step
};

// One cell over its seeds: n, mean, sample standard deviation (n - 1) and the 95% Student t
// interval of the mean (NaN when n < 2), the values by seed (for CompareOverSeeds), and the
// seeds the cell leaves out (a DIVERGED seed, ...; n = 0 and every figure NaN when it has none).
struct Aggregate {
  double mean = 0;
  double std = 0;
  int n = 0;
  double ci_low = 0;
  double ci_high = 0;
  SeedValues samples;
  SeedAccount seeds{};
};

struct ResultRowKey {
  std::string label;                 // `pre_ln`, `p_spheret p=0.5`, `scripted:rezero`, ...
  std::string method;                // RowMethodOf: the method's id, or `scripted:STEM`
  std::optional<double> p;           // for p_spheret
  std::vector<std::string> knobs{};  // the knobs the label prints besides method and p
};

// A column of a results table: a scale of one data set.
struct ResultColumn {
  std::string dataset;  // the trials' `dataset`
  std::string scale;    // a preset name, or "custom"
};

struct ResultTable {
  std::vector<ResultRowKey> rows;  // in the paper's method order, then p, then label
  // Column ids: the scale, or "DATASET SCALE" when the trials span several data sets; by data set
  // (the paper's corpora first), then in preset order (xs, s-cpu, d12-cpu, S, M, L).
  std::vector<std::string> scales;
  std::map<std::string, ResultColumn> columns;  // column id -> its data set and scale
  std::vector<std::string> metrics;
  // cells[row][scale][metric]; missing when no trial of the cell has that value and none of its
  // seeds was left out (an unfinished or unsuccessful seed makes an n = 0 cell that says so).
  std::map<std::string, std::map<std::string, std::map<std::string, Aggregate>>> cells;
  // runs[row][scale]: every trial of the cell, counted or not (the stability table's counts).
  std::map<std::string, std::map<std::string, std::vector<SeedRun>>> runs;
  std::map<std::string, int> left_out;  // trials not counted, by state name (TrialStateName)
  // What else differs between the rows of a column beyond their identity (method, p, the knobs
  // their labels print): over every column, and by column id.
  std::vector<Confound> confounds;
  std::map<std::string, std::vector<Confound>> column_confounds;
  std::set<std::string> identity_keys;  // the keys that tell rows apart
  // configs[row][scale]: every trial's config (the comparisons' confounds).
  std::map<std::string, std::map<std::string, std::vector<TrialConfig>>> configs;
  std::string dataset;  // the trials' dataset (when they share one)
};

// Where each trial falls in a results table: its row (method, p and the knobs that vary between
// the given configs) and its scale column ("custom" without a preset).
struct TrialCell {
  ResultRowKey row;
  std::string scale;  // the column id (see ResultTable::scales)
  ResultColumn column;
};
// Sorts column ids by data set (the paper's corpora first) and then preset order.
void SortColumns(const std::map<std::string, ResultColumn>& columns, std::vector<std::string>* ids);
// The paper's name for a data set ("fineweb-edu", "fineweb_edu" -> FineWeb-Edu; "openwebtext",
// "owt" -> OpenWebText), else `fallback`.
std::string PaperDatasetOf(const std::string& dataset, const std::string& fallback);
std::vector<TrialCell> CellsOf(const std::vector<TrialConfig>& configs);
// Config keys other than method, p, scale and seed whose value differs between the configs (or
// that only some have), in name order.
std::vector<std::string> VaryingConfigKeys(const std::vector<TrialConfig>& configs);
// Rows in the paper's method order, scales in preset order (xs, s-cpu, d12-cpu, S, M, L).
void SortRows(std::vector<ResultRowKey>* rows);
void SortScales(std::vector<std::string>* scales);

// Aggregates the trials in `states` (default kSucceeded only) over seeds. Every trial has a row
// and column, counted or not, and its effective config counts towards the confounds; each cell's
// `seeds` names the seeds it leaves out (a finished seed without the metric too, unless every trial
// of the cell finished without it: a metric the method lacks is not a lost seed).
ResultTable AggregateResults(const std::vector<TrialResult>& trials,
                             const std::vector<std::string>& metrics,
                             const std::vector<TrialState>& states = {TrialState::kSucceeded});

// The seed of a trial's config (the trainer's default 1337 when it sets none).
int64_t SeedOf(const TrialConfig& config);
// The accounting's view of a trial (its seed, state and where it stopped).
SeedRun SeedRunOf(const TrialResult& trial, int64_t seed);

// Describe(values) as an Aggregate; `seeds` (when given, one per value) are kept with the values.
Aggregate Summarize(const std::vector<double>& values, const std::vector<int64_t>& seeds = {});

// The paper's published numbers (reference/paper_tables.csv, embedded in the binary).
class PaperNumbers {
 public:
  // Parses the long-form CSV `dataset,scale,method,p,metric,value`.
  static PaperNumbers Parse(const std::string& csv);
  static const PaperNumbers& Embedded();
  // The published value for one of our cells, when the paper has it. Metric names are ours
  // (train/loss_avg, val/loss, val/ppl, "task/metric"); proj_spheret and cay_spheret are the
  // paper's p_spheret at p = 1 and 2.
  std::optional<double> Find(const std::string& dataset, const std::string& scale,
                             const std::string& method, std::optional<double> p,
                             const std::string& metric) const;
  std::vector<std::string> Datasets() const;

 private:
  std::map<std::string, double> values_;  // key: dataset|scale|method|p|metric
};

// Formats p as the sweep file would ("0.5", "1", "2"): NumberText (config/knob_text.h).
std::string FormatP(double p);

}  // namespace spheret::client
