#include "server/sweep/sweep_expand.h"

#include <cmath>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "base/text_prefix.h"
#include "config/method_registry.h"
#include "config/recipes.h"
#include "config/train_config.h"
#include "server/sweep/sweep_search.h"

namespace spheret {
namespace {

using nlohmann::json;

// An only_for condition: the key and its accepted values as JSON text (hashed, so a long list
// costs one lookup per grid point).
using Condition = std::pair<std::string, absl::flat_hash_set<std::string>>;

std::vector<Condition> Conditions(const ParameterAxis& axis) {
  std::vector<Condition> conditions;
  for (const auto& [key, accepted] : axis.only_for) {
    absl::flat_hash_set<std::string> texts;
    for (const json& value : accepted) texts.insert(value.dump());
    conditions.emplace_back(key, std::move(texts));
  }
  return conditions;
}

// The grid points (knob -> value) before seeds, honouring only_for. Stops as soon as the points
// times the seeds pass `max_trials` (returning what it has), so a huge grid is refused without
// being built: at most max_trials points plus one are ever held.
absl::StatusOr<std::vector<json>> GridPoints(const SweepSpec& spec, int64_t max_trials,
                                             const Interrupt& interrupt) {
  const auto seeds = static_cast<int64_t>(spec.seeds.size());
  std::vector<json> points = {json::object()};
  for (const ParameterAxis& axis : spec.parameters) {
    if (!axis.sampler.distribution.empty()) continue;  // drawn afterwards (SampledPoints)
    const std::vector<Condition> conditions = Conditions(axis);
    std::vector<json> next;
    for (const json& point : points) {
      if (interrupt && next.size() % 1024 == 0) SPHERET_RETURN_IF_ERROR(interrupt());
      bool applies = true;
      for (const auto& [key, accepted] : conditions) {
        const json& value = point.contains(key) ? point.at(key) : spec.base.value(key, json());
        applies = applies && accepted.contains(value.dump());
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
        if (static_cast<int64_t>(next.size()) * seeds > max_trials) return next;
      }
    }
    points = std::move(next);
  }
  return points;
}

// Whether the axis's only_for holds at `point`.
bool Applies(const SweepSpec& spec, const std::vector<Condition>& conditions, const json& point) {
  for (const auto& [key, accepted] : conditions) {
    const json& value = point.contains(key) ? point.at(key) : spec.base.value(key, json());
    if (!accepted.contains(value.dump())) return false;
  }
  return true;
}

// Grid points whose draws of the sampled axes fell short of spec.samples distinct points.
struct ShortDraws {
  int64_t points = 0;     // grid points with fewer distinct draws than samples
  int64_t fewer = 0;      // points (before seeds) fewer than grid points x samples
  std::string example;    // the first such grid point and its count of distinct draws
  int64_t unsampled = 0;  // of them: points where no sampled axis applies (only_for)
};

// Says what ShortDraws counted, for the submitter (ExpandSweep's notices).
std::string ShortDrawsNotice(const SweepSpec& spec, const ShortDraws& s) {
  return absl::StrCat(
      "search.samples: ", spec.samples, " draws per grid point gave fewer distinct trials at ",
      s.points, " grid point(s) (e.g. ", s.example, "), so the sweep has ",
      s.fewer * static_cast<int64_t>(spec.seeds.size()),
      " trial(s) fewer than grid points x samples x seeds (equal draws are one trial); draws "
      "coincide where a range holds few distinct values at 4 significant digits, or int_uniform "
      "or choice has few values",
      s.unsampled > 0
          ? absl::StrCat("; ", s.unsampled, " of these grid points have no sampled axis (only_for)")
          : "");
}

// Each grid point crossed with its group's draws of the sampled axes (each where its only_for
// holds), in grid order; a point that two draws make equal is kept once, and counted in
// `short_draws`.
std::vector<json> SampledPoints(const SweepSpec& spec, const std::vector<json>& grid,
                                ShortDraws* short_draws) {
  if (!sweep_search::HasSamplers(spec)) return grid;
  std::map<std::string, std::vector<json>> draws;  // by group
  std::vector<json> points;
  absl::flat_hash_set<std::string> seen;
  for (const json& point : grid) {
    const std::string group = sweep_search::GroupOf(spec, point);
    auto found = draws.find(group);
    if (found == draws.end()) found = draws.emplace(group, sweep_search::Draws(spec, group)).first;
    int64_t distinct = 0;
    bool sampled = false;
    for (const json& draw : found->second) {
      json extended = point;
      for (const ParameterAxis& axis : spec.parameters) {
        if (axis.sampler.distribution.empty() || !Applies(spec, Conditions(axis), extended)) {
          continue;
        }
        extended[axis.key] = draw.at(axis.key);
        sampled = true;
      }
      if (!seen.insert(extended.dump()).second) continue;
      ++distinct;
      points.push_back(std::move(extended));
    }
    if (distinct == spec.samples) continue;
    if (short_draws->points++ == 0) {
      short_draws->example =
          absl::StrCat(TextPrefix(point.dump(), 256), ": ", distinct, " of ", spec.samples);
    }
    short_draws->fewer += spec.samples - distinct;
    short_draws->unsampled += sampled ? 0 : 1;
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

// The key a trainer message names: "config key 'x'", "config keys 'x'" or "config: x " (for
// connection knobs); "" when none. Plain string search: the message may quote a user's value.
std::string KeyNamedIn(const std::string& error) {
  for (const std::string prefix : {"config key '", "config keys '"}) {
    const size_t start = error.find(prefix);
    if (start == std::string::npos) continue;
    const size_t from = start + prefix.size(), end = error.find('\'', from);
    if (end != std::string::npos) return error.substr(from, end - from);
  }
  const size_t start = error.find("config: ");
  if (start == std::string::npos) return "";
  const size_t from = start + 8, end = error.find(' ', from);
  return end == std::string::npos ? "" : error.substr(from, end - from);
}

// fp32 training state of a GPT of `c`'s size: weights, gradients and AdamW's two moments, 16
// bytes a parameter; parameters ~ 12 n_layer n_embd^2 (attention + MLP) + (vocab + block) n_embd
// (embeddings; the head is tied). Activations are not counted. A double: n_embd^2 x n_layer
// overflows nothing there.
double TrainingBytes(const TrainConfig& c) {
  const double d = static_cast<double>(c.n_embd);
  const double vocab = c.vocab_size > 0 ? static_cast<double>(c.vocab_size) : 50304.0;
  const double params = 12.0 * static_cast<double>(c.n_layer) * d * d +
                        (vocab + static_cast<double>(c.block_size)) * d;
  return 16.0 * params;
}

std::string ModelTooLarge(const TrainConfig& c, int64_t max_bytes) {
  constexpr double kGiB = 1 << 30;
  const double bytes = TrainingBytes(c);
  if (bytes <= static_cast<double>(max_bytes)) return "";
  return absl::StrFormat(
      "config key 'n_embd': the model (n_layer %d, n_embd %d) has about %.3g parameters; its fp32 "
      "training state (weights, gradients, AdamW moments: 16 bytes a parameter) is about %.1f "
      "GiB, above the limit of %.1f GiB (spheret-coordinator --max-model-gib)",
      c.n_layer, c.n_embd, bytes / 16, bytes / kGiB, static_cast<double>(max_bytes) / kGiB);
}

// A trial that starts from a folder (init_from) states the folder's shape: the coordinator sizes
// the model (--max-model-gib) and records its depth before any worker reads the folder, and the
// worker's spheret-lm refuses a shape the folder does not have.
std::string InitFromShapeMissing(const TrainConfig& c) {
  if (c.init_from.empty()) return "";
  std::vector<std::string> missing;
  for (const char* key : {"n_layer", "n_head", "n_embd", "vocab_size", "block_size"}) {
    if (c.explicit_keys.count(key) == 0) missing.push_back(key);
  }
  if (missing.empty()) return "";
  return "config key 'init_from': a sweep's trial that starts from a folder states the folder's "
         "shape, so that the coordinator checks the model's size before a worker reads it (the "
         "worker refuses a shape the folder does not have); set " +
         absl::StrJoin(missing, ", ");
}

// The trainer's verdict on one merged config, with the line of the key it names.
absl::Status CheckTrialConfig(const SweepSpec& spec, const SweepLimits& limits,
                              const json& config) {
  TrainConfig checked;
  absl::Status verdict = ApplyConfigJson(config, &checked);
  if (verdict.ok()) verdict = FinalizeConfig(&checked);
  std::string error(verdict.message());
  if (error.empty() && config.contains("p") && !MethodReads(MethodIdOf(config), "p")) {
    const std::string readers = absl::StrJoin(MethodsReading("p"), ", ");
    error = "config key 'p' applies only to method " + readers +
            "; add only_for: {method: " + readers + "}";
  }
  const int world = spec.resources.nodes * std::max(spec.resources.gpus, 1);
  if (error.empty() && checked.gradient_accumulation_steps % world != 0) {
    error = "config key 'gradient_accumulation_steps' (" +
            std::to_string(checked.gradient_accumulation_steps) +
            ") must be a multiple of the data-parallel world size (" + std::to_string(world) +
            " = nodes x GPUs per node)";
  }
  if (error.empty()) error = InitFromShapeMissing(checked);
  if (error.empty()) error = ModelTooLarge(checked, limits.max_model_bytes);
  if (error.empty()) error = sweep_search::CheckSearchTrial(spec, checked);
  if (error.empty()) return absl::OkStatus();
  const int line = LineOf(spec, KeyNamedIn(error));
  return absl::InvalidArgumentError(absl::StrCat(line > 0 ? absl::StrCat("line ", line, ": ") : "",
                                                 "trial ", TextPrefix(config.dump(), 512), ": ",
                                                 TextPrefix(error, 1024)));
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
    return absl::InvalidArgumentError(absl::StrCat(
        line > 0 ? absl::StrCat("line ", line, ": ") : "", "trial ",
        TextPrefix(config->dump(), 512), ": ", TextPrefix(values.status().message(), 1024)));
  }
  for (const auto& [key, value] : values->items()) {
    if (!config->contains(key) && key != "seed") (*config)[key] = value;
  }
  return absl::OkStatus();
}

// The points a sweep's trials come from (its grid, sampled when it has samplers; a notice for
// draws that came up short): InvalidArgument when they and the seeds are above limits.max_trials.
absl::StatusOr<std::vector<json>> PointsOf(const SweepSpec& spec, const SweepLimits& limits,
                                           const Interrupt& interrupt,
                                           std::vector<std::string>* notices) {
  SPHERET_ASSIGN_OR_RETURN(const std::vector<json> grid,
                           GridPoints(spec, limits.max_trials, interrupt));
  if (sweep_search::HasSamplers(spec) &&
      static_cast<double>(grid.size()) * spec.samples * static_cast<double>(spec.seeds.size()) >
          static_cast<double>(limits.max_trials)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "search.samples: ", grid.size(), " grid points x ", spec.samples, " samples x ",
        spec.seeds.size(), " seeds is above the limit of ", limits.max_trials, " trials"));
  }
  ShortDraws short_draws;
  std::vector<json> points = SampledPoints(spec, grid, &short_draws);
  if (short_draws.points > 0 && notices != nullptr) {
    notices->push_back(ShortDrawsNotice(spec, short_draws));
  }
  const int64_t count = static_cast<int64_t>(points.size() * spec.seeds.size());
  if (count > limits.max_trials) {
    return absl::InvalidArgumentError(absl::StrCat("parameters: the grid has at least ", count,
                                                   " trials, above the limit of ",
                                                   limits.max_trials));
  }
  return points;
}

// The config of one point of the sweep, less its seed: the base, the point, the data set and
// device, the method and its defaults, the recipe's settings and the connection file.
absl::StatusOr<json> PointConfig(const SweepSpec& spec, const json& point) {
  json config = spec.base;
  config.update(point);
  config["dataset"] = spec.dataset;
  if (spec.resources.gpus > 0) config["device"] = "cuda";
  if (!config.contains("method")) config["method"] = MethodIdOf(json::object());
  // The method's own defaults (ngpt: no weight decay, no warmup) are stored too, before the
  // recipe's, which they win over.
  if (config["method"].is_string()) {
    const json defaults = MethodDefaults(config["method"].get<std::string>());
    for (const auto& [key, value] : defaults.items()) {
      if (!config.contains(key)) config[key] = value;
    }
  }
  if (absl::Status status = ExpandRecipe(spec, &config); !status.ok()) return status;
  SPHERET_RETURN_IF_ERROR(AttachConnection(spec.connection_files, &config));
  return config;
}

}  // namespace

absl::StatusOr<std::vector<TrialSpec>> ExpandSweep(const SweepSpec& spec, const SweepLimits& limits,
                                                   const Interrupt& interrupt,
                                                   std::vector<std::string>* notices) {
  SPHERET_ASSIGN_OR_RETURN(const std::vector<json> points,
                           PointsOf(spec, limits, interrupt, notices));
  std::vector<TrialSpec> trials;
  trials.reserve(points.size() * spec.seeds.size());
  for (const json& point : points) {
    SPHERET_ASSIGN_OR_RETURN(json config, PointConfig(spec, point));
    const std::string group =
        spec.search.strategy.empty() ? "" : sweep_search::GroupOf(spec, point);
    for (int64_t seed : spec.seeds) {
      if (interrupt && trials.size() % 256 == 0) SPHERET_RETURN_IF_ERROR(interrupt());
      config["seed"] = seed;
      SPHERET_RETURN_IF_ERROR(CheckTrialConfig(spec, limits, config));
      TrialSpec trial;
      trial.config_json = config.dump();
      trial.trial_key = Sha256Hex(trial.config_json);
      if (!group.empty()) {
        trial.role = "search";
        trial.search_group = group;
      }
      trials.push_back(std::move(trial));
    }
  }
  return trials;
}

}  // namespace spheret
