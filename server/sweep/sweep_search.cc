#include "server/sweep/sweep_search.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/text_prefix.h"
#include "config/knob_text.h"
#include "server/sweep/sweep_yaml.h"

namespace spheret::sweep_search {
namespace {

using nlohmann::json;
using sweep_yaml::CanonicalKnob;
using sweep_yaml::CheckKeys;
using sweep_yaml::ErrorAt;
using sweep_yaml::Integer;
using sweep_yaml::Text;

// A drawn real rounded to 4 significant digits (a learning rate of 0.001235, not
// 0.0012345678901), kept within [min, max].
double Rounded(double value, double min, double max) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return std::clamp(std::strtod(text, nullptr), min, max);
}

// Uniform on [0, 1) from 53 bits of the generator (mt19937_64's output is fixed by the standard;
// the standard library's distributions are not, so draws would differ between libraries).
double Unit(std::mt19937_64& generator) {
  return static_cast<double>(generator() >> 11) * 0x1.0p-53;
}

json Draw(const ParameterAxis& axis, std::mt19937_64& generator) {
  const Sampler& s = axis.sampler;
  const double u = Unit(generator);
  if (s.distribution == "loguniform") {
    return Rounded(std::exp(std::log(s.min) + u * (std::log(s.max) - std::log(s.min))), s.min,
                   s.max);
  }
  if (s.distribution == "uniform") return Rounded(s.min + u * (s.max - s.min), s.min, s.max);
  if (s.distribution == "int_uniform") {
    const auto lo = static_cast<int64_t>(s.min), hi = static_cast<int64_t>(s.max);
    return std::min(hi, lo + static_cast<int64_t>(u * static_cast<double>(hi - lo + 1)));
  }
  const size_t n = axis.values.size();  // choice
  return axis.values[std::min(n - 1, static_cast<size_t>(u * static_cast<double>(n)))];
}

// What ParseSampler promises of a sampled axis's range (sweep_search.h).
absl::Status CheckRange(const YAML::Node& node, const std::string& where, const Sampler& s) {
  if (!(s.min < s.max)) return ErrorAt(node["max"], where + ".max", "must be above min");
  if (s.distribution == "loguniform" && !(s.min > 0)) {
    return ErrorAt(node["min"], where + ".min", "loguniform needs min above 0");
  }
  const bool log = s.distribution == "loguniform";
  const double width = log ? std::log(s.max) - std::log(s.min) : s.max - s.min;
  if (!std::isfinite(width)) {
    return ErrorAt(node["max"], where + ".max",
                   absl::StrCat(log ? "ln(max) - ln(min)" : "max - min", " of ", NumberText(s.min),
                                " .. ", NumberText(s.max),
                                " is wider than the largest double (1.797e308), so every draw "
                                "would be max; narrow the range"));
  }
  constexpr auto kLimit = static_cast<double>(kMaxSampledInteger);
  if (s.distribution == "int_uniform" && (s.min < -kLimit || s.max > kLimit)) {
    return ErrorAt(node[s.min < -kLimit ? "min" : "max"],
                   where + (s.min < -kLimit ? ".min" : ".max"),
                   absl::StrCat("int_uniform draws integers in [-", kMaxSampledInteger, ", ",
                                kMaxSampledInteger, "] (2^53, exact in a double); got ",
                                NumberText(s.min), " .. ", NumberText(s.max)));
  }
  return absl::OkStatus();
}

absl::Status ParseConfirm(const YAML::Node& node, SearchSettings* search) {
  if (absl::Status s = CheckKeys(node, "search.confirm", {"seeds", "top"}); !s.ok()) return s;
  const YAML::Node seeds = node["seeds"];
  if (!seeds || !seeds.IsSequence() || seeds.size() == 0) {
    return ErrorAt(node, "search.confirm.seeds", "must be a non-empty list of integers");
  }
  std::set<int64_t> seen;
  for (const YAML::Node& item : seeds) {
    absl::StatusOr<int64_t> seed = Integer(item, "search.confirm.seeds", 0, INT64_MAX);
    if (!seed.ok()) return seed.status();
    if (!seen.insert(*seed).second) {
      return ErrorAt(item, "search.confirm.seeds", absl::StrCat("lists ", *seed, " twice"));
    }
    search->confirm_seeds.push_back(*seed);
  }
  if (node["top"]) {
    absl::StatusOr<int64_t> top = Integer(node["top"], "search.confirm.top", 1, 100);
    if (!top.ok()) return top.status();
    search->confirm_top = static_cast<int>(*top);
  }
  return absl::OkStatus();
}

// group_by: listed axes, keys linked to one, or base keys; never a sampled axis.
absl::Status ParseGroupBy(const YAML::Node& node, SweepSpec* spec) {
  if (!node.IsSequence() || node.size() == 0) {
    return ErrorAt(node, "search.group_by", "must be a non-empty list of knobs");
  }
  for (const YAML::Node& item : node) {
    absl::StatusOr<std::string> key = Text(item, "search.group_by");
    if (!key.ok()) return key.status();
    bool listed = spec->base.contains(*key);
    for (const ParameterAxis& axis : spec->parameters) {
      if (axis.key == *key && !axis.sampler.distribution.empty()) {
        return ErrorAt(item, "search.group_by",
                       *key + " is sampled; group by listed knobs (values:) only");
      }
      listed = listed || axis.key == *key;
      for (const auto& [linked, values] : axis.linked) listed = listed || linked == *key;
    }
    if (!listed) {
      return ErrorAt(item, "search.group_by",
                     TextPrefix(*key) + " is not a knob of this sweep (an axis or a base key)");
    }
    if (std::find(spec->group_by.begin(), spec->group_by.end(), *key) != spec->group_by.end()) {
      return ErrorAt(item, "search.group_by", TextPrefix(*key) + " is listed twice");
    }
    spec->group_by.push_back(*key);
  }
  return absl::OkStatus();
}

absl::Status ParseRungs(const YAML::Node& node, SearchSettings* search) {
  if (search->strategy != "asha") {
    for (const char* key : {"min_iters", "reduction_factor"}) {
      if (node[key]) {
        return ErrorAt(node[key], std::string("search.") + key, "applies to strategy asha only");
      }
    }
    return absl::OkStatus();
  }
  if (!node["min_iters"]) return ErrorAt(node, "search", "strategy asha needs min_iters");
  absl::StatusOr<int64_t> min_iters =
      Integer(node["min_iters"], "search.min_iters", 1, 1'000'000'000);
  if (!min_iters.ok()) return min_iters.status();
  search->min_iters = *min_iters;
  if (node["reduction_factor"]) {
    absl::StatusOr<int64_t> eta =
        Integer(node["reduction_factor"], "search.reduction_factor", 2, 100);
    if (!eta.ok()) return eta.status();
    search->reduction_factor = static_cast<int>(*eta);
  }
  return absl::OkStatus();
}

absl::Status ParseSamples(const YAML::Node& node, SweepSpec* spec) {
  const bool sampled = HasSamplers(*spec);
  const std::string& strategy = spec->search.strategy;
  if (strategy == "grid" && sampled) {
    return ErrorAt(node["strategy"], "search.strategy",
                   "grid crosses listed values; a sampled axis (distribution:) needs random or "
                   "asha");
  }
  if (strategy == "random" && !sampled) {
    return ErrorAt(node["strategy"], "search.strategy",
                   "random draws sampled axes (distribution:), and this sweep has none");
  }
  if (!sampled) {
    if (node["samples"]) {
      return ErrorAt(node["samples"], "search.samples", "this sweep has no sampled axis to draw");
    }
    return absl::OkStatus();
  }
  if (!node["samples"]) return ErrorAt(node, "search", "sampled axes need samples: N");
  absl::StatusOr<int64_t> samples = Integer(node["samples"], "search.samples", 1, 100'000);
  if (!samples.ok()) return samples.status();
  spec->samples = static_cast<int>(*samples);
  return absl::OkStatus();
}

}  // namespace

bool HasSamplers(const SweepSpec& spec) {
  return std::any_of(spec.parameters.begin(), spec.parameters.end(),
                     [](const ParameterAxis& a) { return !a.sampler.distribution.empty(); });
}

absl::Status CheckNoSamplers(const SweepSpec& spec) {
  for (const ParameterAxis& axis : spec.parameters) {
    if (axis.sampler.distribution.empty()) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("line ", axis.line, ": parameters.", axis.key,
                     ": a sampled axis (distribution:) needs a search: block with strategy random "
                     "or asha and samples: N"));
  }
  return absl::OkStatus();
}

absl::Status ParseSampler(const YAML::Node& node, const std::string& where, ParameterAxis* axis) {
  absl::StatusOr<std::string> distribution = Text(node["distribution"], where + ".distribution");
  if (!distribution.ok()) return distribution.status();
  const std::set<std::string> known = {"loguniform", "uniform", "int_uniform", "choice"};
  if (known.count(*distribution) == 0) {
    return ErrorAt(
        node["distribution"], where + ".distribution",
        "must be loguniform, uniform, int_uniform or choice, got " + TextPrefix(*distribution));
  }
  axis->sampler.distribution = *distribution;
  if (node["with"]) return ErrorAt(node["with"], where + ".with", "links lists to a listed axis");
  if (*distribution == "choice") {
    for (const char* key : {"min", "max"}) {
      if (node[key]) return ErrorAt(node[key], where + "." + key, "choice draws from values");
    }
    return absl::OkStatus();  // ParseAxis reads values
  }
  if (node["values"]) {
    return ErrorAt(node["values"], where + ".values",
                   *distribution + " draws between min and max; values go with choice");
  }
  const bool integer = *distribution == "int_uniform";
  double* bounds[] = {&axis->sampler.min, &axis->sampler.max};
  const char* names[] = {"min", "max"};
  for (int i = 0; i < 2; ++i) {
    const std::string at = where + "." + names[i];
    if (!node[names[i]]) return ErrorAt(node, where, std::string("needs ") + names[i]);
    absl::StatusOr<json> value = CanonicalKnob(node[names[i]], axis->key);
    if (!value.ok()) return value.status();
    if (integer ? !value->is_number_integer() : !value->is_number_float()) {
      return ErrorAt(node[names[i]], at,
                     absl::StrCat(axis->key,
                                  integer ? " is not an integer knob: use uniform"
                                          : " is not a real-valued knob",
                                  value->is_number_integer() ? ": use int_uniform" : ""));
    }
    *bounds[i] = value->get<double>();
  }
  return CheckRange(node, where, axis->sampler);
}

absl::Status ParseSearch(const YAML::Node& node, SweepSpec* spec) {
  if (absl::Status s = CheckKeys(node, "search",
                                 {"strategy", "samples", "group_by", "metric", "mode", "min_iters",
                                  "reduction_factor", "seed", "confirm"});
      !s.ok()) {
    return s;
  }
  SearchSettings& search = spec->search;
  if (!node["strategy"]) return ErrorAt(node, "search", "needs strategy: grid, random or asha");
  absl::StatusOr<std::string> strategy = Text(node["strategy"], "search.strategy");
  if (!strategy.ok()) return strategy.status();
  if (*strategy != "grid" && *strategy != "random" && *strategy != "asha") {
    return ErrorAt(node["strategy"], "search.strategy",
                   "must be grid, random or asha, got " + TextPrefix(*strategy));
  }
  search.strategy = *strategy;
  search.metric = spec->metric;
  search.minimize = spec->minimize;
  if (node["metric"]) {
    absl::StatusOr<std::string> metric = Text(node["metric"], "search.metric");
    if (!metric.ok()) return metric.status();
    search.metric = *metric;
  }
  if (node["mode"]) {
    const std::string mode = node["mode"].IsScalar() ? node["mode"].Scalar() : "";
    if (mode != "min" && mode != "max") {
      return ErrorAt(node["mode"], "search.mode", "must be min or max, got " + TextPrefix(mode));
    }
    search.minimize = mode == "min";
  }
  if (node["seed"]) {
    absl::StatusOr<int64_t> seed = Integer(node["seed"], "search.seed", 0, INT64_MAX);
    if (!seed.ok()) return seed.status();
    spec->sample_seed = *seed;
  }
  if (absl::Status s = ParseRungs(node, &search); !s.ok()) return s;
  if (absl::Status s = ParseSamples(node, spec); !s.ok()) return s;
  if (node["group_by"]) {
    if (absl::Status s = ParseGroupBy(node["group_by"], spec); !s.ok()) return s;
  }
  if (node["confirm"]) return ParseConfirm(node["confirm"], &search);
  return absl::OkStatus();
}

std::string GroupOf(const SweepSpec& spec, const json& point) {
  json group = json::object();
  for (const std::string& key : spec.group_by) {
    group[key] = point.contains(key) ? point.at(key) : spec.base.value(key, json());
  }
  return group.dump();
}

std::vector<json> Draws(const SweepSpec& spec, const std::string& group) {
  const std::string digest =
      Sha256Hex(absl::StrCat("spheret-draws/", spec.sample_seed, "/", group));
  std::mt19937_64 generator(std::strtoull(digest.substr(0, 16).c_str(), nullptr, 16));
  std::vector<json> draws;
  for (int i = 0; i < spec.samples; ++i) {
    json draw = json::object();
    for (const ParameterAxis& axis : spec.parameters) {
      if (!axis.sampler.distribution.empty()) draw[axis.key] = Draw(axis, generator);
    }
    draws.push_back(std::move(draw));
  }
  return draws;
}

std::string CheckSearchTrial(const SweepSpec& spec, const TrainConfig& config) {
  const SearchSettings& search = spec.search;
  if (!search.asha()) return "";
  if (config.max_iters <= search.min_iters) {
    return absl::StrCat("config key 'max_iters' (", config.max_iters,
                        ") must be above search.min_iters (", search.min_iters,
                        "): ASHA judges a trial at rungs below its max_iters");
  }
  const bool validation = search.metric.rfind("val/", 0) == 0;
  const int64_t interval = validation ? config.eval_interval : config.log_interval;
  if (interval <= 0 || search.min_iters % interval != 0) {
    return absl::StrCat("config key '", validation ? "eval_interval" : "log_interval", "' (",
                        interval, ") must divide search.min_iters (", search.min_iters,
                        "), so that ", search.metric, " is reported at every rung");
  }
  return "";
}

}  // namespace spheret::sweep_search
