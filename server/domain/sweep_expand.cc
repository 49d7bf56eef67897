#include "server/domain/sweep_expand.h"

#include <regex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "config/recipes.h"
#include "config/train_config.h"

namespace spheret {
namespace {

using nlohmann::json;

// The grid points (knob -> value) before seeds, honouring only_for. Stops as soon as the points
// times the seeds pass `max_trials` (returning what it has), so a huge grid is refused without
// being built: at most one axis's fan-out of max_trials points is ever held.
std::vector<json> GridPoints(const SweepSpec& spec, int64_t max_trials) {
  const auto seeds = static_cast<int64_t>(spec.seeds.size());
  std::vector<json> points = {json::object()};
  for (const ParameterAxis& axis : spec.parameters) {
    std::vector<json> next;
    for (const json& point : points) {
      bool applies = true;
      for (const auto& [key, accepted] : axis.only_for) {
        const json& value = point.contains(key) ? point.at(key) : spec.base.value(key, json());
        applies = applies && std::find(accepted.begin(), accepted.end(), value) != accepted.end();
      }
      if (!applies) {
        next.push_back(point);
        continue;
      }
      for (size_t i = 0; i < axis.values.size(); ++i) {
        json extended = point;
        extended[axis.key] = axis.values[i];
        for (const auto& [key, values] : axis.linked) extended[key] = values[i];
        next.push_back(std::move(extended));
      }
      if (static_cast<int64_t>(next.size()) * seeds > max_trials) return next;
    }
    points = std::move(next);
  }
  return points;
}

int LineOf(const SweepSpec& spec, const std::string& key) {
  for (const ParameterAxis& axis : spec.parameters) {
    if (axis.key == key) return axis.line;
    for (const auto& [linked, values] : axis.linked) {
      if (linked == key) return axis.line;
    }
  }
  for (const auto& [base_key, line] : spec.base_lines) {
    if (base_key == key) return line;
  }
  return 0;
}

// The trainer's verdict on one merged config, with the line of the key it names.
absl::Status CheckTrialConfig(const SweepSpec& spec, const json& config) {
  TrainConfig checked;
  absl::Status verdict = ApplyConfigJson(config, &checked);
  if (verdict.ok()) verdict = FinalizeConfig(&checked);
  std::string error(verdict.message());
  if (error.empty() && config.contains("p") && config.at("method") != "p_spheret") {
    error = "config key 'p' applies only to method p_spheret; add only_for: {method: p_spheret}";
  }
  const int world = spec.resources.nodes * std::max(spec.resources.gpus, 1);
  if (error.empty() && checked.gradient_accumulation_steps % world != 0) {
    error = "config key 'gradient_accumulation_steps' (" +
            std::to_string(checked.gradient_accumulation_steps) +
            ") must be a multiple of the data-parallel world size (" + std::to_string(world) +
            " = nodes x GPUs per node)";
  }
  if (error.empty()) return absl::OkStatus();
  // The trainer names the key as "config key 'x'" or, for connection knobs, "config: x must".
  static const std::regex kKey("config keys? '([a-z_0-9]+)'|config: ([a-z_0-9]+) ");
  std::smatch match;
  const int line = std::regex_search(error, match, kKey)
                       ? LineOf(spec, match[1].matched ? match[1].str() : match[2].str())
                       : 0;
  return absl::InvalidArgumentError(absl::StrCat(line > 0 ? absl::StrCat("line ", line, ": ") : "",
                                                 "trial ", config.dump(), ": ", error));
}

// A config with a `recipe` stores the recipe's settings itself (explicit keys win), so the trial
// records its effective configuration.
absl::Status ExpandRecipe(const SweepSpec& spec, json* config) {
  const std::string recipe = config->value("recipe", "");
  if (recipe.empty()) return absl::OkStatus();
  bool scale_keys_given = true;
  for (const std::string& key : RecipeScaleKeys(recipe)) {
    scale_keys_given = scale_keys_given && config->contains(key);
  }
  absl::StatusOr<json> values = RecipeValues(recipe, config->value("scale", ""), scale_keys_given);
  if (!values.ok()) {
    const int line = LineOf(spec, "recipe");
    return absl::InvalidArgumentError(
        absl::StrCat(line > 0 ? absl::StrCat("line ", line, ": ") : "", "trial ", config->dump(),
                     ": ", values.status().message()));
  }
  for (const auto& [key, value] : values->items()) {
    if (!config->contains(key) && key != "seed") (*config)[key] = value;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TrialSpec>> ExpandSweep(const SweepSpec& spec,
                                                   const SweepLimits& limits) {
  const std::vector<json> points = GridPoints(spec, limits.max_trials);
  const int64_t count = static_cast<int64_t>(points.size() * spec.seeds.size());
  if (count > limits.max_trials) {
    return absl::InvalidArgumentError(absl::StrCat("parameters: the grid has at least ", count,
                                                   " trials, above the limit of ",
                                                   limits.max_trials));
  }
  std::vector<TrialSpec> trials;
  trials.reserve(count);
  for (const json& point : points) {
    json config = spec.base;
    config.update(point);
    config["dataset"] = spec.dataset;
    if (spec.resources.gpus > 0) config["device"] = "cuda";
    if (!config.contains("method")) config["method"] = "pre_ln";
    // The method's own defaults (ngpt: no weight decay, no warmup) are stored too, before the
    // recipe's, which they win over.
    if (config["method"].is_string()) {
      const json defaults = MethodDefaults(config["method"].get<std::string>());
      for (const auto& [key, value] : defaults.items()) {
        if (!config.contains(key)) config[key] = value;
      }
    }
    if (absl::Status status = ExpandRecipe(spec, &config); !status.ok()) return status;
    for (int64_t seed : spec.seeds) {
      config["seed"] = seed;
      if (absl::Status status = CheckTrialConfig(spec, config); !status.ok()) return status;
      TrialSpec trial;
      trial.config_json = config.dump();
      trial.trial_key = Sha256Hex(trial.config_json);
      trials.push_back(std::move(trial));
    }
  }
  return trials;
}

}  // namespace spheret
