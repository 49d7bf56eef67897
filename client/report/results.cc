#include "client/report/results.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/str_split.h"
#include "config/connection_options.h"
#include "config/knob_text.h"
#include "config/method_registry.h"
#include "config/scale_presets.h"
#include "config/train_config.h"

namespace spheret::client {
namespace {

using nlohmann::json;

// Where `name` stands in `order`; anything else after it (then by name, by the caller).
int Rank(const std::vector<std::string>& order, const std::string& name) {
  auto found = std::find(order.begin(), order.end(), name);
  return found == order.end() ? static_cast<int>(order.size()) : found - order.begin();
}

// The paper's order of methods (Table 2) and sizes smallest first, as the config defines them.
int MethodRank(const std::string& method) {
  static const std::vector<std::string> kOrder = MethodIds();
  return Rank(kOrder, method);
}

int ScaleRank(const std::string& scale) {
  static const std::vector<std::string> kOrder = ScalePresetNames();
  return Rank(kOrder, scale);
}

// Keys that identify a cell by themselves (the identity knobs, a scripted method's connection
// file), or that only repeat it.
bool IsCellKey(const std::string& key) {
  const std::vector<std::string>& connection = ConnectionIdentityKeys();  // in RowMethodOf
  return key == "dataset" ||
         std::find(kIdentityKnobs.begin(), kIdentityKnobs.end(), key) != kIdentityKnobs.end() ||
         std::find(connection.begin(), connection.end(), key) != connection.end();
}

// The column of a config: its scale ("custom" without a preset) and data set.
std::string ScaleOf(const json& config) { return config.value("scale", std::string("custom")); }
std::string DatasetOf(const json& config) { return config.value("dataset", std::string()); }
// Whether `key` takes one value per column (scale and data set): a key linked to the scale, such
// as the paper's learning rate per size, does not tell rows apart.
bool FollowsTheColumn(const std::vector<TrialConfig>& configs, const std::string& key) {
  std::map<std::string, std::set<std::string>> by_column;
  for (const TrialConfig& view : configs) {
    const json& config = view.object();
    auto value = config.find(key);
    by_column[DatasetOf(config) + "|" + ScaleOf(config)].insert(
        value == config.end() ? "" : value->dump());
  }
  if (by_column.size() < 2) return false;
  for (const auto& [column, values] : by_column) {
    if (values.size() > 1) return false;
  }
  return true;
}

// Whether `key` takes one value per method (and p): a key linked to the method, such as the
// paper's ScaleNorm per method (`with: {scalenorm: [...]}` on the method axis), does not tell
// rows apart either.
bool FollowsTheMethod(const std::vector<TrialConfig>& configs, const std::string& key) {
  std::map<std::string, std::set<std::string>> by_method;
  for (const TrialConfig& view : configs) {
    const json& config = view.object();
    auto value = config.find(key);
    auto p = config.find("p");
    by_method[RowMethodOf(config) + "|" + (p == config.end() ? "" : p->dump())].insert(
        value == config.end() ? "" : value->dump());
  }
  for (const auto& [method, values] : by_method) {
    if (values.size() > 1) return false;
  }
  return true;
}

// Config keys whose value differs between trials (other than the cell keys).
std::vector<std::string> VaryingKeys(const std::vector<TrialConfig>& configs) {
  std::map<std::string, std::set<std::string>> seen;
  for (const TrialConfig& view : configs) {
    const json& config = view.object();
    for (auto it = config.begin(); it != config.end(); ++it) {
      if (!IsCellKey(it.key())) seen[it.key()].insert(it.value().dump());
    }
  }
  std::vector<std::string> keys;
  for (const auto& [key, values] : seen) {
    size_t present = 0;
    for (const TrialConfig& config : configs) present += config.Find(key) != nullptr;
    if (values.size() > 1 || present != configs.size()) keys.push_back(key);
  }
  return keys;
}

ResultRowKey RowKeyOf(const json& config, const std::vector<std::string>& varying) {
  ResultRowKey key;
  key.method = RowMethodOf(config);
  key.label = key.method;
  auto p = config.find("p");
  if (MethodReads(key.method, "p") && p != config.end() && p->is_number()) {
    key.p = p->get<double>();
    key.label += " p=" + FormatP(*key.p);
  }
  for (const std::string& name : varying) {
    auto value = config.find(name);
    if (value == config.end()) continue;
    key.label += " " + name + "=" + KnobValueText(*value);
    key.knobs.push_back(name);
  }
  return key;
}

bool RowBefore(const ResultRowKey& a, const ResultRowKey& b) {
  if (MethodRank(a.method) != MethodRank(b.method))
    return MethodRank(a.method) < MethodRank(b.method);
  if (a.method != b.method) return a.method < b.method;
  if (a.p != b.p) return a.p < b.p;
  return a.label < b.label;
}

}  // namespace

std::string FormatP(double p) { return NumberText(p); }

int64_t SeedOf(const TrialConfig& config) {
  const json* seed = config.Find("seed");
  return seed != nullptr && seed->is_number_integer() ? seed->get<int64_t>() : 1337;
}

Aggregate Summarize(const std::vector<double>& values, const std::vector<int64_t>& seeds) {
  const Description d = Describe(values);
  Aggregate aggregate;
  aggregate.mean = d.mean;
  aggregate.std = d.std;
  aggregate.n = d.n;
  aggregate.ci_low = d.ci_low;
  aggregate.ci_high = d.ci_high;
  aggregate.samples = {seeds, values};
  return aggregate;
}

std::vector<TrialCell> CellsOf(const std::vector<TrialConfig>& configs) {
  std::vector<std::string> varying;
  for (const std::string& key : VaryingKeys(configs)) {
    if (!FollowsTheColumn(configs, key) && !FollowsTheMethod(configs, key)) varying.push_back(key);
  }
  std::set<std::string> datasets;
  for (const TrialConfig& config : configs) datasets.insert(DatasetOf(config.object()));
  std::vector<TrialCell> cells;
  for (const TrialConfig& view : configs) {
    const json& config = view.object();
    TrialCell cell{
        RowKeyOf(config, varying), ScaleOf(config), {DatasetOf(config), ScaleOf(config)}};
    if (datasets.size() > 1) cell.scale = cell.column.dataset + " " + cell.column.scale;
    cells.push_back(std::move(cell));
  }
  return cells;
}

std::vector<std::string> VaryingConfigKeys(const std::vector<TrialConfig>& configs) {
  return VaryingKeys(configs);
}

void SortRows(std::vector<ResultRowKey>* rows) { std::sort(rows->begin(), rows->end(), RowBefore); }

void SortScales(std::vector<std::string>* scales) {
  std::stable_sort(scales->begin(), scales->end(), [](const std::string& a, const std::string& b) {
    return ScaleRank(a) < ScaleRank(b);
  });
}

std::string PaperDatasetOf(const std::string& dataset, const std::string& fallback) {
  std::string letters;
  for (char c : std::filesystem::path(dataset).filename().string()) {
    if (std::isalnum(static_cast<unsigned char>(c))) letters += static_cast<char>(std::tolower(c));
  }
  if (letters.find("fineweb") != std::string::npos) return "FineWeb-Edu";
  if (letters.find("openwebtext") != std::string::npos || letters == "owt") return "OpenWebText";
  return fallback;
}

void SortColumns(const std::map<std::string, ResultColumn>& columns,
                 std::vector<std::string>* ids) {
  static const std::vector<std::string> kPaperDatasets = {"FineWeb-Edu", "OpenWebText"};
  auto order = [&](const std::string& id) {
    auto found = columns.find(id);
    const ResultColumn column = found == columns.end() ? ResultColumn{"", id} : found->second;
    return std::make_tuple(Rank(kPaperDatasets, PaperDatasetOf(column.dataset, "")), column.dataset,
                           ScaleRank(column.scale), id);
  };
  std::sort(ids->begin(), ids->end(),
            [&](const std::string& a, const std::string& b) { return order(a) < order(b); });
}

SeedRun SeedRunOf(const TrialResult& trial, int64_t seed) {
  return {trial.trial_id, seed, trial.state, trial.stop_step, trial.stop_step_exact};
}

namespace {

// Each cell's account of its seeds for `metric`. Where no seed has the value and every trial
// finished, the method lacks the metric: nothing is lost (the cell stays a plain "—").
SeedAccount AccountFor(const std::vector<SeedRun>& runs, const Aggregate* counted) {
  if (counted != nullptr) return AccountSeeds(runs, counted->samples.seeds);
  const bool unfinished = std::any_of(runs.begin(), runs.end(), [](const SeedRun& run) {
    return run.state != TrialState::kSucceeded;
  });
  return unfinished ? AccountSeeds(runs, {}) : SeedAccount{};
}

// Fills table->cells from the values by cell, with every cell's seed account.
void SummarizeCells(
    const std::map<std::string, std::map<std::string, std::map<std::string, SeedValues>>>& values,
    ResultTable* table) {
  for (const auto& [label, by_scale] : table->runs) {
    for (const auto& [scale, runs] : by_scale) {
      for (const std::string& metric : table->metrics) {
        const SeedValues* samples = nullptr;
        if (auto row = values.find(label); row != values.end()) {
          if (auto cell = row->second.find(scale); cell != row->second.end()) {
            if (auto found = cell->second.find(metric); found != cell->second.end()) {
              samples = &found->second;
            }
          }
        }
        Aggregate aggregate =
            samples ? Summarize(samples->values, samples->seeds) : Summarize(std::vector<double>{});
        aggregate.seeds = AccountFor(runs, samples ? &aggregate : nullptr);
        if (aggregate.n > 0 || !aggregate.seeds.lost.empty()) {
          table->cells[label][scale][metric] = std::move(aggregate);
        }
      }
    }
  }
}

// The confounds of the table's rows, over every column and by column: row identity is the
// method, p, the seed and the knobs the row labels print.
void FindTableConfounds(const std::vector<TrialConfig>& configs,
                        const std::vector<TrialCell>& cells, ResultTable* table) {
  std::set<std::string> identity = DefaultIdentityKeys();
  std::vector<ConfoundTrial> trials;
  for (size_t i = 0; i < cells.size(); ++i) {
    identity.insert(cells[i].row.knobs.begin(), cells[i].row.knobs.end());
    trials.push_back({cells[i].row.label, cells[i].scale, &configs[i].object()});
  }
  table->identity_keys = identity;
  table->confounds = FindConfounds(trials, identity);
  if (table->confounds.empty()) return;
  std::map<std::string, std::vector<ConfoundTrial>> by_column;
  for (const ConfoundTrial& trial : trials) by_column[trial.column].push_back(trial);
  for (const auto& [column, in_column] : by_column) {
    table->column_confounds[column] = FindConfounds(in_column, identity);
  }
}

}  // namespace

ResultTable AggregateResults(const std::vector<TrialResult>& trials,
                             const std::vector<std::string>& metrics,
                             const std::vector<TrialState>& states) {
  ResultTable table;
  table.metrics = metrics;
  std::vector<TrialConfig> configs;
  for (const TrialResult& trial : trials) configs.push_back(trial.config);
  const std::vector<TrialCell> cells = CellsOf(configs);
  std::set<std::string> datasets;
  // values[row label][scale][metric] -> one value per counted seed
  std::map<std::string, std::map<std::string, std::map<std::string, SeedValues>>> values;
  std::map<std::string, ResultRowKey> rows;
  std::set<std::string> scales;
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialCell& cell = cells[i];
    if (configs[i].is_object()) datasets.insert(DatasetOf(configs[i].object()));
    rows[cell.row.label] = cell.row;
    scales.insert(cell.scale);
    table.columns[cell.scale] = cell.column;
    table.runs[cell.row.label][cell.scale].push_back(SeedRunOf(trials[i], SeedOf(configs[i])));
    table.configs[cell.row.label][cell.scale].push_back(configs[i]);
    if (std::find(states.begin(), states.end(), trials[i].state) == states.end()) {
      ++table.left_out[TrialStateName(trials[i].state)];
      continue;
    }
    for (const std::string& metric : metrics) {
      auto found = trials[i].values.find(metric);
      if (found != trials[i].values.end() && std::isfinite(found->second)) {
        SeedValues& samples = values[cell.row.label][cell.scale][metric];
        samples.seeds.push_back(SeedOf(configs[i]));
        samples.values.push_back(found->second);
      }
    }
  }
  for (const auto& [label, row] : rows) table.rows.push_back(row);
  SortRows(&table.rows);
  table.scales.assign(scales.begin(), scales.end());
  SortColumns(table.columns, &table.scales);
  SummarizeCells(values, &table);
  FindTableConfounds(configs, cells, &table);
  if (datasets.size() == 1) table.dataset = *datasets.begin();
  return table;
}

std::string ZeroShotMetricName(const std::string& task, const std::string& metric) {
  return std::string(kZeroShotPrefix) + task + "/" + metric;
}

double ZeroShotDisplayValue(const std::string& metric, double value) {
  return metric == "acc" || metric == "acc_norm" ? 100 * value : value;
}

void SortZeroShotMetrics(std::vector<std::string>* metrics) {
  const std::vector<std::string>& tasks = ZeroShotTaskNames();
  auto rank = [&](const std::string& name) {
    const std::vector<std::string> parts = absl::StrSplit(name, '/');
    const size_t task = parts.size() == 3
                            ? std::find(tasks.begin(), tasks.end(), parts[1]) - tasks.begin()
                            : tasks.size();
    return std::make_pair(task, name);
  };
  std::sort(metrics->begin(), metrics->end(),
            [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
}

}  // namespace spheret::client
