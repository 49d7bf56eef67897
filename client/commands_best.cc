// `spheret results SWEEP --best-per KNOB`: each group's best setting found by its search, and
// that setting's confirm trials over their seeds.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/fetch.h"
#include "client/report/results.h"
#include "client/report/table.h"
#include "config/knob_text.h"
#include "config/trial_config.h"

namespace spheret::client {
namespace {

using nlohmann::json;

struct Group {
  std::vector<const TrialResult*> search, confirm;
};

// A trial's setting: its config less its seed, as canonical text.
std::string SettingOf(const TrialConfig& config) {
  json setting = config.object();
  setting.erase("seed");
  return setting.dump();
}

// The knobs (other than seed) whose values differ among `trials`, as "k=v k=v" for `best`.
std::string VaryingKnobs(const std::vector<const TrialResult*>& trials, const TrialConfig& best) {
  std::map<std::string, std::set<std::string>> values;
  for (const TrialResult* trial : trials) {
    for (const auto& [key, value] : trial->config.object().items()) {
      values[key].insert(value.dump());
    }
  }
  std::vector<std::string> parts;
  for (const auto& [key, seen] : values) {
    if (key != "seed" && seen.size() > 1) parts.push_back(key + "=" + best.KnobText(key));
  }
  return absl::StrJoin(parts, " ");
}

std::string Cell(const Aggregate& d) {
  if (d.n == 0) return "";
  if (d.n < 2) return absl::StrCat(FormatNumber(d.mean, 4), " (n 1)");
  return absl::StrCat(FormatNumber(d.mean, 4), " ± ", FormatNumber(d.std, 4), " [",
                      FormatNumber(d.ci_low, 4), ", ", FormatNumber(d.ci_high, 4), "] (n ", d.n,
                      ")");
}

std::vector<std::string> Row(const std::string& name, const Group& group, const std::string& metric,
                             bool maximize) {
  const TrialResult* best = nullptr;
  int pruned = 0;
  for (const TrialResult* trial : group.search) {
    pruned += trial->state == TrialState::kPruned;
    auto value = trial->values.find(metric);
    if (trial->state != TrialState::kSucceeded || value == trial->values.end() ||
        std::isnan(value->second))
      continue;
    const double v = value->second, b = best ? best->values.at(metric) : 0;
    if (best == nullptr || (maximize ? v > b : v < b)) best = trial;
  }
  std::vector<std::string> row = {name, std::to_string(group.search.size()),
                                  std::to_string(pruned)};
  if (best == nullptr) {
    row.insert(row.end(), {"(no search trial SUCCEEDED)", "", ""});
    return row;
  }
  const TrialConfig& config = best->config;
  std::vector<double> confirmed;
  for (const TrialResult* trial : group.confirm) {
    auto value = trial->values.find(metric);
    if (trial->state == TrialState::kSucceeded && value != trial->values.end() &&
        SettingOf(trial->config) == SettingOf(config)) {
      confirmed.push_back(value->second);
    }
  }
  row.insert(row.end(), {absl::StrCat("#", best->trial_id, " ", VaryingKnobs(group.search, config)),
                         FormatNumber(best->values.at(metric), 4), Cell(Summarize(confirmed))});
  return row;
}

}  // namespace

absl::Status BestPer(Connection& connection, const ResultsOptions& options, std::ostream& out) {
  absl::StatusOr<Format> format = ParseFormat(options.format);
  if (!format.ok()) return format.status();
  absl::StatusOr<std::vector<int64_t>> sweeps = ResolveSweeps(connection, options.sweeps);
  if (!sweeps.ok()) return sweeps.status();
  const std::string& metric = options.metrics.front();
  absl::StatusOr<std::vector<TrialResult>> trials =
      FetchResults(connection, *sweeps, {metric}, /*search_trials=*/true);
  if (!trials.ok()) return trials.status();
  std::map<std::string, Group> groups;
  for (const TrialResult& trial : *trials) {
    if (trial.role.empty()) continue;
    const TrialConfig& config = trial.config;
    std::vector<std::string> parts;
    for (const std::string& knob : options.best_per) {
      parts.push_back(knob + "=" + config.KnobText(knob));
    }
    Group& group = groups[absl::StrJoin(parts, " ")];
    (trial.role == "confirm" ? group.confirm : group.search).push_back(&trial);
  }
  if (groups.empty()) {
    return absl::FailedPreconditionError(
        "--best-per: the sweeps have no search trials (a sweep file's search: block makes them)");
  }
  Table table;
  table.header = {absl::StrJoin(options.best_per, " "),
                  "search trials",
                  "pruned",
                  "best setting",
                  metric,
                  absl::StrCat(metric, " confirmed: mean ± std [95% CI] (n)")};
  table.numeric = {false, true, true, false, true, false};
  for (const auto& [name, group] : groups) {
    table.rows.push_back(Row(name, group, metric, options.maximize));
  }
  out << Render(table, *format);
  return absl::OkStatus();
}

}  // namespace spheret::client
