// Sweep files: the YAML a researcher writes ("these methods x these scales x these p values x these
// seeds on this data set"), parsed into a typed spec and validated once.
//
//   name: depth-ablation
//   dataset: fortunes
//   metric: {name: val/loss, goal: minimize}
//   base: {block_size: 256, max_iters: 2000, learning_rate: 6e-4}
//   parameters:
//     method: {values: [pre_ln, geonorm, p_spheret]}
//     scale:  {values: [xs, s-cpu]}
//     p:      {values: [0.5, 1, 2], only_for: {method: p_spheret}}
//     # linked keys move with the axis: the i-th value of each goes with the i-th scale
//     # scale: {values: [S, M, L], with: {learning_rate: [6e-4, 3e-4, 2.5e-4]}}
//   seeds: [1337, 1338]
//   resources: {gpus: 1, nodes: 1}
//   priority: 50
//   max_restarts: 5
//
// Every knob (in `base` and `parameters`) is a key of `spheret-lm train`, checked with the
// trainer's own configuration code. Errors name the line and the key.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/metric_catalog.h"
#include "server/domain/records.h"
#include "server/sweep/connection_files.h"

namespace spheret {

// An axis drawn at random (`distribution:` in the file) instead of listed: loguniform and
// uniform between min and max (drawn values rounded to 4 significant digits), int_uniform over
// the integers min..max, choice among `values`.
struct Sampler {
  std::string distribution;  // "" for a listed axis
  double min = 0, max = 0;
};

// One grid axis: a config key and its values, applied only where `only_for` holds.
struct ParameterAxis {
  std::string key;
  std::vector<nlohmann::json> values;  // scalars, canonical (as the trainer types the key)
  Sampler sampler;                     // a sampled axis (values: choice's options)
  // key -> accepted values of an earlier axis or of `base`; empty = always.
  std::vector<std::pair<std::string, std::vector<nlohmann::json>>> only_for;
  // `with`: keys whose i-th value is set together with values[i] (each list as long as values).
  std::vector<std::pair<std::string, std::vector<nlohmann::json>>> linked;
  int line = 0;  // 1-based line of the axis in the file
};

struct SweepResources {
  int gpus = 0;       // GPUs per node; 0 runs on CPU workers
  int cpu_slots = 1;  // slots per node on a CPU worker (when gpus == 0)
  int nodes = 1;      // nodes of a gang (> 1: multi-node data parallel)
  int SlotsPerNode() const { return gpus > 0 ? gpus : cpu_slots; }
};

struct SweepSpec {
  std::string name;
  std::string dataset;
  std::string metric = protocol::kValLoss;
  bool minimize = true;
  nlohmann::json base = nlohmann::json::object();  // canonical values
  std::vector<ParameterAxis> parameters;
  std::vector<int64_t> seeds = {1337};
  SweepResources resources;
  int priority = 50;     // 0..1000, higher first
  int max_restarts = 3;  // attempts after the first before a trial is FAILED
  // 1-based line of each key of `base` (for messages about expanded trials).
  std::vector<std::pair<std::string, int>> base_lines;
  // The `search:` block (server/sweep/sweep_search.h); search.strategy "" without one.
  SearchSettings search;
  int samples = 0;                    // draws of the sampled axes per group
  std::vector<std::string> group_by;  // knobs whose values make a search group
  int64_t sample_seed = 0;            // seeds the draws (search.seed)
  // The files sent with the sweep (server/sweep/connection_files.h); not in the YAML.
  ConnectionFiles connection_files;
};

struct SweepLimits {
  int64_t max_trials = 100'000;  // a grid above this is refused
  // A trial whose model's fp32 training state (weights, gradients and AdamW's two moments:
  // 16 bytes a parameter) would pass this is refused: it could run on no worker.
  int64_t max_model_bytes = int64_t{80} << 30;
};

// The shape of a sweep file, checked before anything else reads it (every one is refused with
// InvalidArgument naming the limit).
struct SweepFileLimits {
  size_t max_bytes = 1 << 20;      // the whole file
  int max_depth = 16;              // lists and mappings inside each other (a sweep needs 5)
  int64_t max_nodes = 250'000;     // values, lists and mappings in the file
  size_t max_scalar_bytes = 4096;  // one value or key
};

// The longest text a string knob, `dataset`, `name` or an eval field may have.
inline constexpr size_t kMaxKnobTextBytes = 1024;

// Parses and validates a sweep file. Never throws; every error is InvalidArgument with
// "line N: <key>: <what is wrong>" (or "sweep file: ..." when no line applies), and echoes at most
// a short prefix of the file's text.
absl::StatusOr<SweepSpec> ParseSweepSpec(std::string_view yaml, const SweepFileLimits& limits = {});

}  // namespace spheret
