#include "client/report/confounds.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_join.h"
#include "config/knob_text.h"
#include "config/train_config.h"
#include "config/trial_config.h"

namespace spheret::client {
namespace {

using nlohmann::json;

std::string ValueText(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "on" : "off";
  return KnobValueText(value);
}

// The effective configs' value texts of every key, per column, per row: column -> key -> row ->
// the set of its trials' values.
using RowValues = std::map<std::string, std::set<std::string>>;
using ColumnKeys = std::map<std::string, std::map<std::string, RowValues>>;

ColumnKeys Collect(const std::vector<ConfoundTrial>& trials, const std::vector<json>& configs,
                   const std::set<std::string>& identity_keys) {
  std::set<std::string> keys;
  for (const json& config : configs) {
    for (auto it = config.begin(); it != config.end(); ++it) {
      if (identity_keys.count(it.key()) == 0) keys.insert(it.key());
    }
  }
  ColumnKeys columns;
  for (size_t i = 0; i < trials.size(); ++i) {
    for (const std::string& key : keys) {
      auto value = configs[i].find(key);
      columns[trials[i].column][key][trials[i].row].insert(
          value == configs[i].end() ? "unset" : ValueText(*value));
    }
  }
  return columns;
}

bool Differs(const RowValues& rows) {
  for (const auto& [row, values] : rows) {
    if (values != rows.begin()->second) return true;
  }
  return false;
}

// Adds `row` under `text` once, keeping the first-appearance order of values and rows.
void AddRow(Confound* confound, const std::string& text, const std::string& row) {
  ConfoundValue* slot = nullptr;
  for (ConfoundValue& value : confound->values) {
    if (value.text == text) slot = &value;
  }
  if (slot == nullptr) slot = &confound->values.emplace_back(ConfoundValue{text, {}});
  for (const std::string& present : slot->rows) {
    if (present == row) return;
  }
  slot->rows.push_back(row);
}

}  // namespace

json EffectiveConfig(const json& config) {
  absl::StatusOr<TrainConfig> resolved = ResolveConfigObject(config);
  if (resolved.ok()) return ConfigToJson(*resolved);
  // A config this version refuses: its known keys resolved, the others on top as stored, so that
  // it differs from the resolved configs in what it sets, not in every default.
  static const std::vector<std::string> kKnown = ConfigKeys();
  json known = json::object(), unknown = json::object();
  for (auto it = config.begin(); it != config.end(); ++it) {
    const bool is_known = std::find(kKnown.begin(), kKnown.end(), it.key()) != kKnown.end();
    (is_known ? known : unknown)[it.key()] = it.value();
  }
  resolved = ResolveConfigObject(known);
  json effective = resolved.ok() ? ConfigToJson(*resolved) : ConfigToJson(TrainConfig{});
  effective.update(resolved.ok() ? unknown : config);
  return effective;
}

std::vector<Confound> FindConfounds(const std::vector<ConfoundTrial>& trials,
                                    const std::set<std::string>& identity_keys) {
  std::vector<json> configs;
  for (const ConfoundTrial& trial : trials) {
    configs.push_back(trial.config == nullptr ? json::object() : EffectiveConfig(*trial.config));
  }
  const ColumnKeys columns = Collect(trials, configs, identity_keys);
  std::map<std::string, std::set<std::string>> confounded;  // key -> columns where it differs
  for (const auto& [column, keys] : columns) {
    for (const auto& [key, rows] : keys) {
      if (Differs(rows)) confounded[key].insert(column);
    }
  }
  std::vector<Confound> out;
  for (const auto& [key, in_columns] : confounded) {
    Confound confound{key, {}};
    for (size_t i = 0; i < trials.size(); ++i) {
      if (in_columns.count(trials[i].column) == 0) continue;
      auto value = configs[i].find(key);
      AddRow(&confound, value == configs[i].end() ? "unset" : ValueText(*value), trials[i].row);
    }
    out.push_back(std::move(confound));
  }
  return out;
}

std::string ConfoundSentence(const Confound& confound) {
  std::vector<std::string> parts;
  for (const ConfoundValue& value : confound.values) {
    parts.push_back(value.text + " for " + absl::StrJoin(value.rows, ", "));
  }
  return "rows also differ in " + confound.key + ": " + absl::StrJoin(parts, "; ");
}

std::vector<std::string> ConfoundSentences(const std::vector<Confound>& confounds) {
  std::vector<std::string> sentences;
  for (const Confound& confound : confounds) sentences.push_back(ConfoundSentence(confound));
  return sentences;
}

std::string ConfoundField(const std::vector<Confound>& confounds) {
  std::vector<std::string> keys;
  for (const Confound& confound : confounds) {
    std::vector<std::string> values;
    for (const ConfoundValue& value : confound.values) {
      values.push_back(value.text + " (" + absl::StrJoin(value.rows, ", ") + ")");
    }
    keys.push_back(confound.key + ": " + absl::StrJoin(values, "; "));
  }
  return absl::StrJoin(keys, " | ");
}

}  // namespace spheret::client
