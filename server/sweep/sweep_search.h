// A sweep's search: sampled axes and the `search:` block, beside the grid of sweep_spec.h.
//
//   parameters:
//     method:        {values: [pre_ln, geonorm]}
//     learning_rate: {distribution: loguniform, min: 1e-4, max: 3e-2}
//   search:
//     strategy: asha          # grid | random | asha
//     samples: 9              # draws of the sampled axes per group
//     group_by: [method]      # an independent search per method
//     metric: val/loss        # default: metric.name
//     mode: min               # default: metric.goal
//     min_iters: 30           # asha: the first rung; rungs at 30, 90, 270 below max_iters
//     reduction_factor: 3     # asha: eta
//     seed: 0                 # seeds the draws (with the group)
//     confirm: {seeds: [1337, 1338, 1339], top: 1}
//
// Draws are a function of the file (seed, group, axes), so the same file gives the same trials.
// Internal to spheret_sweep.
#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/train_config.h"
#include "server/sweep/sweep_spec.h"

namespace spheret::sweep_search {

// int_uniform's bounds lie within [-2^53, 2^53], the integers a double (Sampler::min, max) holds
// exactly; every draw is one of them.
inline constexpr int64_t kMaxSampledInteger = int64_t{1} << 53;

// `distribution:` (with min and max, or values for choice) of the axis at `node`. The range is
// one draws can cover: uniform's width max - min and loguniform's ln(max) - ln(min) are finite
// doubles (a wider uniform range drew max every time), loguniform's min is above 0, and
// int_uniform's bounds are within kMaxSampledInteger; InvalidArgument naming the bound otherwise.
absl::Status ParseSampler(const YAML::Node& node, const std::string& where, ParameterAxis* axis);
// The `search:` block, after `parameters` and `metric` were parsed; also checks that sampled axes
// come with a search that draws them.
absl::Status ParseSearch(const YAML::Node& node, SweepSpec* spec);
// Refuses sampled axes in a sweep without `search:`.
absl::Status CheckNoSamplers(const SweepSpec& spec);
// Whether `spec` has sampled axes.
bool HasSamplers(const SweepSpec& spec);
// The group of a grid point: the JSON object of its group_by knobs (null where a knob is unset).
std::string GroupOf(const SweepSpec& spec, const nlohmann::json& point);
// The spec.samples draws of the sampled axes for `group`: objects of key -> canonical value.
std::vector<nlohmann::json> Draws(const SweepSpec& spec, const std::string& group);
// What an ASHA search needs of each trial (max_iters above min_iters, eval_interval dividing
// min_iters); "" when it holds, else the reason naming the key.
std::string CheckSearchTrial(const SweepSpec& spec, const TrainConfig& config);

}  // namespace spheret::sweep_search
