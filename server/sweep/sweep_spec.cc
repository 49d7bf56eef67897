#include "server/sweep/sweep_spec.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/text_prefix.h"
#include "server/sweep/sweep_scan.h"
#include "server/sweep/sweep_search.h"
#include "server/sweep/sweep_yaml.h"

namespace spheret {
namespace {

using nlohmann::json;
using sweep_yaml::CanonicalKnob;
using sweep_yaml::CheckKeys;
using sweep_yaml::CheckNoDuplicateKeys;
using sweep_yaml::ErrorAt;
using sweep_yaml::Integer;
using sweep_yaml::Text;

// [A-Za-z0-9][A-Za-z0-9._-]{0,127}, by plain character tests (no regex on a user's text).
bool IsSweepName(const std::string& name) {
  if (name.empty() || name.size() > 128 ||
      !absl::ascii_isalnum(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::Status ParseMetric(const YAML::Node& node, SweepSpec* spec) {
  if (absl::Status s = CheckKeys(node, "metric", {"name", "goal"}); !s.ok()) return s;
  if (node["name"]) {
    absl::StatusOr<std::string> name = Text(node["name"], "metric.name");
    if (!name.ok()) return name.status();
    spec->metric = *name;
  }
  if (node["goal"]) {
    const std::string goal = node["goal"].Scalar();
    if (goal != "minimize" && goal != "maximize") {
      return ErrorAt(node["goal"], "metric.goal",
                     "must be minimize or maximize, got " + TextPrefix(goal));
    }
    spec->minimize = goal == "minimize";
  }
  return absl::OkStatus();
}

absl::Status ParseBase(const YAML::Node& node, SweepSpec* spec) {
  if (!node.IsMap()) return ErrorAt(node, "base", "must be a mapping of spheret-lm config keys");
  if (absl::Status s = CheckNoDuplicateKeys(node, "base"); !s.ok()) return s;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    absl::StatusOr<json> value = CanonicalKnob(entry.second, key);
    if (!value.ok()) return value.status();
    spec->base[key] = *value;
    spec->base_lines.emplace_back(key, entry.first.Mark().line + 1);
  }
  return absl::OkStatus();
}

// eval: {tasks: [...], data: DIR, every: final|checkpoints}: the base keys eval_tasks (a comma
// list), eval_data and eval_every of every trial (the trainer checks the names and values).
absl::Status ParseEval(const YAML::Node& node, SweepSpec* spec) {
  if (absl::Status s = CheckKeys(node, "eval", {"tasks", "data", "every"}); !s.ok()) return s;
  for (const char* key : {"tasks", "data"}) {
    if (!node[key]) return ErrorAt(node, "eval", std::string("needs '") + key + "'");
  }
  const YAML::Node tasks = node["tasks"];
  if (!tasks.IsSequence() || tasks.size() == 0) {
    return ErrorAt(tasks, "eval.tasks", "must be a non-empty list of task names");
  }
  std::vector<std::string> names;
  for (const YAML::Node& task : tasks) {
    absl::StatusOr<std::string> name = Text(task, "eval.tasks");
    if (!name.ok()) return name.status();
    names.push_back(*name);
  }
  absl::StatusOr<std::string> data = Text(node["data"], "eval.data");
  if (!data.ok()) return data.status();
  std::string every = "final";
  if (node["every"]) {
    absl::StatusOr<std::string> value = Text(node["every"], "eval.every");
    if (!value.ok()) return value.status();
    if (*value != "final" && *value != "checkpoints") {
      return ErrorAt(node["every"], "eval.every",
                     "must be final or checkpoints, got " + TextPrefix(*value));
    }
    every = *value;
  }
  for (const char* key : {"eval_tasks", "eval_data", "eval_every"}) {
    if (spec->base.contains(key)) {
      return ErrorAt(node, "eval", std::string("base also sets ") + key + "; keep one of the two");
    }
  }
  spec->base["eval_tasks"] = absl::StrJoin(names, ",");
  spec->base["eval_data"] = *data;
  spec->base["eval_every"] = every;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<json>> KnobValues(const YAML::Node& node, const std::string& key,
                                             const std::string& where) {
  std::vector<json> values;
  if (!node.IsSequence()) {
    absl::StatusOr<json> one = CanonicalKnob(node, key);
    if (!one.ok()) return one.status();
    return std::vector<json>{*one};
  }
  if (node.size() == 0) return ErrorAt(node, where, "is an empty list");
  absl::flat_hash_set<std::string> seen;  // canonical values (one type per key) as JSON text
  for (const YAML::Node& item : node) {
    absl::StatusOr<json> value = CanonicalKnob(item, key);
    if (!value.ok()) return value.status();
    if (!seen.insert(value->dump()).second) {
      return ErrorAt(item, where, "lists " + TextPrefix(value->dump()) + " twice");
    }
    values.push_back(*value);
  }
  return values;
}

// Whether `key` is already a knob of the sweep: in base, an axis, or linked to an axis.
bool KeyTaken(const SweepSpec& spec, const std::string& key) {
  if (spec.base.contains(key)) return true;
  for (const ParameterAxis& axis : spec.parameters) {
    if (axis.key == key) return true;
    for (const auto& [linked, values] : axis.linked) {
      if (linked == key) return true;
    }
  }
  return false;
}

// with: {key: [v1, v2, ...], ...}: one value per value of the axis.
absl::Status ParseLinked(const YAML::Node& node, const std::string& where, const SweepSpec& spec,
                         ParameterAxis* axis) {
  if (!node.IsMap() || node.size() == 0) {
    return ErrorAt(node, where, "must map config keys to lists, one value per axis value");
  }
  if (absl::Status s = CheckNoDuplicateKeys(node, where); !s.ok()) return s;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    const std::string at = where + "." + key;
    if (key == axis->key || KeyTaken(spec, key)) {
      return ErrorAt(entry.first, at, "is already set by base or another axis; keep one");
    }
    if (!entry.second.IsSequence()) {
      return ErrorAt(entry.second, at,
                     absl::StrCat("must be a list of ", axis->values.size(), " values"));
    }
    std::vector<json> values;
    for (const YAML::Node& item : entry.second) {
      absl::StatusOr<json> value = CanonicalKnob(item, key);
      if (!value.ok()) return value.status();
      values.push_back(*value);
    }
    if (values.size() != axis->values.size()) {
      return ErrorAt(entry.second, at,
                     absl::StrCat("has ", values.size(), " values but ", axis->key, " has ",
                                  axis->values.size(), "; linked lists must be equally long"));
    }
    axis->linked.emplace_back(key, std::move(values));
  }
  return absl::OkStatus();
}

absl::Status AddOnlyFor(const YAML::Node& node, const std::string& where, ParameterAxis axis,
                        SweepSpec* spec);

absl::Status ParseAxis(const YAML::Node& key_node, const YAML::Node& node, SweepSpec* spec) {
  ParameterAxis axis;
  axis.key = key_node.Scalar();
  axis.line = key_node.Mark().line + 1;
  const std::string where = "parameters." + axis.key;
  if (absl::Status s =
          CheckKeys(node, where, {"values", "only_for", "with", "distribution", "min", "max"});
      !s.ok()) {
    return s;
  }
  if (spec->base.contains(axis.key)) {
    return ErrorAt(key_node, where, "is also set in base; keep one of the two");
  }
  if (KeyTaken(*spec, axis.key)) {
    return ErrorAt(key_node, where, "is already linked to an axis above (with:); keep one");
  }
  if (node["distribution"]) {
    if (absl::Status s = sweep_search::ParseSampler(node, where, &axis); !s.ok()) return s;
  }
  if (axis.sampler.distribution.empty() && (node["min"] || node["max"])) {
    return ErrorAt(node, where, "min and max go with a distribution: to draw from");
  }
  if (!node["values"] && axis.sampler.distribution.empty()) {
    return ErrorAt(node, where, "needs 'values: [...]' (or a distribution: to draw from)");
  }
  if (!node["values"] && axis.sampler.distribution == "choice") {
    return ErrorAt(node, where, "distribution choice draws from 'values: [...]'");
  }
  if (!node["values"]) return AddOnlyFor(node, where, std::move(axis), spec);
  absl::StatusOr<std::vector<json>> values =
      KnobValues(node["values"], axis.key, where + ".values");
  if (!values.ok()) return values.status();
  axis.values = std::move(*values);
  if (const YAML::Node with = node["with"]) {
    if (absl::Status s = ParseLinked(with, where + ".with", *spec, &axis); !s.ok()) return s;
  }
  return AddOnlyFor(node, where, std::move(axis), spec);
}

// The axis's only_for conditions (on axes above it), then the axis itself.
absl::Status AddOnlyFor(const YAML::Node& node, const std::string& where, ParameterAxis axis,
                        SweepSpec* spec) {
  if (const YAML::Node only_for = node["only_for"]) {
    if (!only_for.IsMap() || only_for.size() == 0) {
      return ErrorAt(only_for, where + ".only_for", "must map earlier keys to values");
    }
    for (const auto& condition : only_for) {
      const std::string other = condition.first.Scalar();
      if (!KeyTaken(*spec, other)) {
        return ErrorAt(condition.first, where + ".only_for." + other,
                       "must name an axis listed above it, a key linked to one, or a base key");
      }
      absl::StatusOr<std::vector<json>> accepted =
          KnobValues(condition.second, other, where + ".only_for." + other);
      if (!accepted.ok()) return accepted.status();
      axis.only_for.emplace_back(other, std::move(*accepted));
    }
  }
  spec->parameters.push_back(std::move(axis));
  return absl::OkStatus();
}

absl::Status ParseParameters(const YAML::Node& node, SweepSpec* spec) {
  if (!node.IsMap() || node.size() == 0) {
    return ErrorAt(node, "parameters", "must map config keys to {values: [...]}");
  }
  if (absl::Status s = CheckNoDuplicateKeys(node, "parameters"); !s.ok()) return s;
  for (const auto& entry : node) {
    if (absl::Status s = ParseAxis(entry.first, entry.second, spec); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ParseSeeds(const YAML::Node& node, SweepSpec* spec) {
  if (!node.IsSequence() || node.size() == 0) {
    return ErrorAt(node, "seeds", "must be a non-empty list of integers");
  }
  spec->seeds.clear();
  absl::flat_hash_set<int64_t> seen;
  for (const YAML::Node& item : node) {
    absl::StatusOr<int64_t> seed = Integer(item, "seeds", 0, INT64_MAX);
    if (!seed.ok()) return seed.status();
    if (!seen.insert(*seed).second) {
      return ErrorAt(item, "seeds", absl::StrCat("lists ", *seed, " twice"));
    }
    spec->seeds.push_back(*seed);
  }
  return absl::OkStatus();
}

absl::Status ParseResources(const YAML::Node& node, SweepSpec* spec) {
  if (absl::Status s = CheckKeys(node, "resources", {"gpus", "cpu_slots", "nodes"}); !s.ok()) {
    return s;
  }
  const std::pair<const char*, int*> fields[] = {{"gpus", &spec->resources.gpus},
                                                 {"cpu_slots", &spec->resources.cpu_slots},
                                                 {"nodes", &spec->resources.nodes}};
  for (const auto& [key, target] : fields) {
    if (!node[key]) continue;
    absl::StatusOr<int64_t> value =
        Integer(node[key], std::string("resources.") + key, std::string(key) == "gpus" ? 0 : 1, 64);
    if (!value.ok()) return value.status();
    *target = static_cast<int>(*value);
  }
  return absl::OkStatus();
}

absl::Status ParseTopLevel(const YAML::Node& root, SweepSpec* spec) {
  if (absl::Status s = CheckKeys(root, "",
                                 {"name", "dataset", "metric", "base", "parameters", "seeds",
                                  "resources", "priority", "max_restarts", "eval", "search"});
      !s.ok()) {
    return s;
  }
  for (const char* required : {"name", "dataset", "parameters"}) {
    if (!root[required]) {
      return absl::InvalidArgumentError(
          absl::StrCat("sweep file: missing required key '", required, "'"));
    }
  }
  absl::StatusOr<std::string> name = Text(root["name"], "name");
  if (!name.ok()) return name.status();
  if (!IsSweepName(*name)) {
    return ErrorAt(root["name"], "name", "use letters, digits, '.', '_' and '-' (at most 128)");
  }
  spec->name = *name;
  absl::StatusOr<std::string> dataset = Text(root["dataset"], "dataset");
  if (!dataset.ok()) return dataset.status();
  spec->dataset = *dataset;
  absl::Status status = absl::OkStatus();
  if (root["metric"]) status = ParseMetric(root["metric"], spec);
  if (status.ok() && root["base"]) status = ParseBase(root["base"], spec);
  if (status.ok() && root["eval"]) status = ParseEval(root["eval"], spec);
  if (status.ok()) status = ParseParameters(root["parameters"], spec);
  if (status.ok() && root["seeds"]) status = ParseSeeds(root["seeds"], spec);
  if (status.ok() && root["resources"]) status = ParseResources(root["resources"], spec);
  if (status.ok()) {
    status = root["search"] ? sweep_search::ParseSearch(root["search"], spec)
                            : sweep_search::CheckNoSamplers(*spec);
  }
  if (!status.ok()) return status;
  if (root["priority"]) {
    absl::StatusOr<int64_t> priority = Integer(root["priority"], "priority", 0, 1000);
    if (!priority.ok()) return priority.status();
    spec->priority = static_cast<int>(*priority);
  }
  if (root["max_restarts"]) {
    absl::StatusOr<int64_t> restarts = Integer(root["max_restarts"], "max_restarts", 0, 100);
    if (!restarts.ok()) return restarts.status();
    spec->max_restarts = static_cast<int>(*restarts);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SweepSpec> ParseSweepSpec(std::string_view yaml, const SweepFileLimits& limits) {
  SweepSpec spec;
  if (yaml.size() > limits.max_bytes) {  // before anything reads it whole
    return absl::InvalidArgumentError(
        absl::StrCat("sweep file: ", yaml.size(), " bytes, above the limit of ", limits.max_bytes,
                     " (it is stored whole): drop comments or split the sweep"));
  }
  // YAML allows no NUL, and yaml-cpp reads NULs near the start as UTF-16 or UTF-32, which turns
  // valid UTF-8 bytes into lone surrogates (invalid UTF-8 in a trial's config).
  if (yaml.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("sweep file: contains a NUL byte (not YAML text)");
  }
  try {  // YAML is UTF-8 text, and every string of it may end up in a trial's JSON config
    (void)json(std::string(yaml)).dump();
  } catch (const json::type_error&) {
    return absl::InvalidArgumentError("sweep file: not UTF-8 text");
  }
  if (absl::Status s = sweep_yaml::CheckSweepFileShape(yaml, limits); !s.ok()) return s;
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) return absl::InvalidArgumentError("sweep file: must be a YAML mapping");
    if (absl::Status s = ParseTopLevel(root, &spec); !s.ok()) return s;
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ": YAML syntax: ", TextPrefix(e.msg, 256)));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("sweep file: ", TextPrefix(e.what(), 256)));
  } catch (const std::exception& e) {  // e.g. nlohmann-json's; none may cross into the caller
    return absl::InvalidArgumentError(absl::StrCat("sweep file: ", TextPrefix(e.what(), 256)));
  }
  return spec;
}

}  // namespace spheret
