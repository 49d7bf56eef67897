#include "server/sweep/sweep_spec.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/sha256.h"
#include "server/sweep/sweep_expand.h"

namespace spheret {
namespace {

constexpr char kDepthAblation[] = R"(name: depth-ablation
dataset: fortunes
metric: {name: val/loss, goal: minimize}
base: {block_size: 256, batch_size: 16, max_iters: 2000, learning_rate: 6e-4, warmup_iters: 100, eval_interval: 200}
parameters:
  method: {values: [pre_ln, peri_ln, geonorm, p_spheret]}
  scale:  {values: [xs, s-cpu]}
  p:      {values: [0.5, 1, 2], only_for: {method: p_spheret}}
seeds: [1337, 1338]
resources: {gpus: 1, nodes: 1}
priority: 50
max_restarts: 5
)";

TEST(SweepSpecTest, ParsesTheDesignExample) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(kDepthAblation);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "depth-ablation");
  EXPECT_EQ(spec->dataset, "fortunes");
  EXPECT_EQ(spec->metric, "val/loss");
  EXPECT_TRUE(spec->minimize);
  ASSERT_EQ(spec->parameters.size(), 3u);
  EXPECT_EQ(spec->parameters[2].key, "p");
  EXPECT_EQ(spec->parameters[2].line, 8);
  EXPECT_EQ(spec->parameters[2].values.size(), 3u);
  EXPECT_TRUE(spec->parameters[2].values[1].is_number_float()) << "p: 1 is typed as the float knob";
  EXPECT_EQ(spec->base.at("learning_rate").get<double>(), 6e-4);
  EXPECT_EQ(spec->seeds, (std::vector<int64_t>{1337, 1338}));
  EXPECT_EQ(spec->resources.gpus, 1);
  EXPECT_EQ(spec->max_restarts, 5);
}

TEST(SweepSpecTest, EvalBlockBecomesEveryTrialsZeroShotKeys) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(
      "name: s\ndataset: d\neval: {tasks: [piqa, hellaswag], data: zs}\n"
      "parameters: {method: {values: [pre_ln]}}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->base.at("eval_tasks"), "piqa,hellaswag");
  EXPECT_EQ(spec->base.at("eval_data"), "zs");
  EXPECT_EQ(spec->base.at("eval_every"), "final");
}

// init_from travels to the trainer as written (the worker's spheret-lm resolves it under its
// --data-root, like a data set); a malformed one is refused at submit, and so is one whose trial
// does not state the shape the coordinator sizes the model by.
TEST(SweepSpecTest, InitFromIsATrialKeyAndAMalformedOneIsRefused) {
  const std::string shape =
      "n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50257, block_size: 1024";
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpec("name: s\ndataset: d\nbase: {init_from: 'hf-gpt2:gpt2-small', " + shape +
                     "}\n" + "parameters: {method: {values: [pre_ln, geonorm]}}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 2u);
  for (const TrialSpec& trial : *trials) {
    EXPECT_EQ(nlohmann::json::parse(trial.config_json).at("init_from"), "hf-gpt2:gpt2-small");
  }
  spec = ParseSweepSpec(
      "name: s\ndataset: d\nbase: {init_from: 'gpt2'}\nparameters: {method: {values: [pre_ln]}}\n");
  absl::StatusOr<std::vector<TrialSpec>> refused =
      spec.ok() ? ExpandSweep(*spec) : absl::StatusOr<std::vector<TrialSpec>>(spec.status());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("init_from' must be hf-gpt2:DIR"), std::string::npos)
      << refused.status();
  spec = ParseSweepSpec(
      "name: s\ndataset: d\nbase: {init_from: 'hf-gpt2:big', n_layer: 48}\n"
      "parameters: {method: {values: [pre_ln]}}\n");
  refused = spec.ok() ? ExpandSweep(*spec) : absl::StatusOr<std::vector<TrialSpec>>(spec.status());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "states the folder's shape, so that the coordinator checks the model's size before "
                "a worker reads it (the worker refuses a shape the folder does not have); set "
                "n_head, n_embd, vocab_size, block_size"),
            std::string::npos)
      << refused.status();
}

// Found by the fuzzer: NULs made yaml-cpp read valid UTF-8 as UTF-16, and the lone surrogate it
// decoded threw out of a trial config's dump (corpus/sweep_spec/crash_nul_read_as_utf16).
TEST(SweepSpecTest, NulBytesAreRefusedBeforeYamlReadsThemAsUtf16) {
  const std::string yaml("n\0a\0m\0e\0:\0 \0s\0\nA\xd8\xa7", 19);
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(yaml);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), "sweep file: contains a NUL byte (not YAML text)");
}

TEST(SweepExpandTest, CountsHonourOnlyForAndSeeds) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(kDepthAblation);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  // (3 methods + p_spheret x 3 p values) x 2 scales x 2 seeds.
  EXPECT_EQ(trials->size(), (3u + 3u) * 2u * 2u);
  std::set<std::string> keys;
  int with_p = 0;
  for (const TrialSpec& trial : *trials) {
    keys.insert(trial.trial_key);
    EXPECT_EQ(trial.trial_key, Sha256Hex(trial.config_json));
    const nlohmann::json config = nlohmann::json::parse(trial.config_json);
    EXPECT_EQ(config.dump(), trial.config_json) << "canonical: sorted keys, compact";
    EXPECT_EQ(config.at("device"), "cuda") << "resources.gpus > 0";
    if (config.contains("p")) {
      ++with_p;
      EXPECT_EQ(config.at("method"), "p_spheret");
    }
  }
  EXPECT_EQ(keys.size(), trials->size()) << "every trial key is distinct";
  EXPECT_EQ(with_p, 3 * 2 * 2);
}

TEST(SweepExpandTest, KeysAreStableAcrossSpellings) {
  // The same grid written differently (flow vs block style, 1 vs 1.0, key order) gives the same
  // keys.
  absl::StatusOr<SweepSpec> a = ParseSweepSpec(
      "name: a\ndataset: d\nbase: {learning_rate: 1, max_iters: 10}\n"
      "parameters: {method: {values: [geonorm]}}\n");
  absl::StatusOr<SweepSpec> b = ParseSweepSpec(
      "name: b\ndataset: d\nbase:\n  max_iters: 10\n  learning_rate: 1.0\n"
      "parameters:\n  method:\n    values: [geonorm]\n");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ExpandSweep(*a)->front().trial_key, ExpandSweep(*b)->front().trial_key);
}

// Issue 15: the looped-model keys are sweep axes like any other, and ngpt's own defaults (no
// weight decay, no warmup) are stored with its trials, unless the sweep sets them.
TEST(SweepExpandTest, LoopsPerLoopLossAndReadoutAreSweepable) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(
      "name: looped\ndataset: d\nbase: {scale: xs, max_iters: 3000, lr_decay_iters: 3000}\n"
      "parameters:\n  method: {values: [pre_ln, ngpt, autonorm, p_spheret]}\n"
      "  loops: {values: [1, 2]}\n"
      "  per_loop_loss: {values: [true], only_for: {loops: 2}}\n"
      "  readout: {values: [layernorm, scale_visible], only_for: {method: pre_ln}}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), 2u * 2u + 3u * 2u);  // pre_ln x loops x readout, the others x loops
  int looped = 0;
  for (const TrialSpec& trial : *trials) {
    const nlohmann::json config = nlohmann::json::parse(trial.config_json);
    if (config.at("loops") == 2) {
      ++looped;
      EXPECT_EQ(config.at("per_loop_loss"), true);
    }
    EXPECT_EQ(config.contains("readout"), config.at("method") == "pre_ln");
    if (config.at("method") == "ngpt") {
      EXPECT_EQ(config.at("weight_decay"), 0.0);
      EXPECT_EQ(config.at("warmup_iters"), 0);
    } else {
      EXPECT_FALSE(config.contains("weight_decay"));
    }
  }
  EXPECT_EQ(looped, 5);
}

struct Malformed {
  const char* name;
  const char* yaml;
  const char* message;  // a substring the error must contain
};

class MalformedSweepTest : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedSweepTest, IsRefusedWithAMessageNamingWhatIsWrong) {
  const Malformed& c = GetParam();
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(c.yaml);
  absl::Status status = spec.status();
  if (spec.ok()) {
    SweepLimits limits;
    limits.max_trials = 10;
    status = ExpandSweep(*spec, limits).status();
  }
  ASSERT_FALSE(status.ok()) << c.name << " was accepted";
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find(c.message), std::string::npos)
      << c.name << ": got \"" << status.message() << "\", want it to contain \"" << c.message
      << "\"";
}

// clang-format off
const Malformed kMalformed[] = {
    {"not_a_mapping", "- a\n- b\n", "must be a YAML mapping"},
    {"yaml_syntax", "name: [unclosed\n", "line 2: YAML syntax"},
    {"missing_name", "dataset: d\nparameters: {method: {values: [pre_ln]}}\n", "missing required key 'name'"},
    {"missing_parameters", "name: s\ndataset: d\n", "missing required key 'parameters'"},
    {"unknown_top_key", "name: s\ndataset: d\nsedes: [1]\nparameters: {method: {values: [pre_ln]}}\n", "line 3: sedes: unknown key"},
    {"unknown_config_key", "name: s\ndataset: d\nbase: {lerning_rate: 1e-3}\nparameters: {method: {values: [pre_ln]}}\n", "line 3: lerning_rate: unknown config key 'lerning_rate'"},
    {"bad_type", "name: s\ndataset: d\nbase:\n  learning_rate: fast\nparameters: {method: {values: [pre_ln]}}\n", "line 4: learning_rate: config key 'learning_rate' must be a number"},
    {"unknown_method", "name: s\ndataset: d\nparameters:\n  method: {values: [pre_ln, pre_lnn]}\n", "line 4: method: config key 'method' must be one of"},
    {"axis_without_values", "name: s\ndataset: d\nparameters:\n  method: {only_for: {scale: xs}}\n", "parameters.method: needs 'values"},
    {"empty_values", "name: s\ndataset: d\nparameters:\n  method: {values: []}\n", "line 4: parameters.method.values: is an empty list"},
    {"duplicate_value", "name: s\ndataset: d\nparameters:\n  method: {values: [geonorm, geonorm]}\n", "lists \"geonorm\" twice"},
    {"p_not_positive", "name: s\ndataset: d\nparameters:\n  method: {values: [p_spheret]}\n  p: {values: [0], only_for: {method: p_spheret}}\n", "line 5: trial"},
    {"p_for_other_methods", "name: s\ndataset: d\nparameters:\n  method: {values: [pre_ln, p_spheret]}\n  p: {values: [2]}\n", "line 5: trial"},
    {"only_for_later_axis", "name: s\ndataset: d\nparameters:\n  p: {values: [2], only_for: {method: p_spheret}}\n  method: {values: [p_spheret]}\n", "must name an axis listed above it"},
    {"seed_as_knob", "name: s\ndataset: d\nbase: {seed: 3}\nparameters: {method: {values: [pre_ln]}}\n", "line 3: seed: not a sweep knob"},
    {"duplicate_seed", "name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}}\nseeds: [1, 1]\n", "line 4: seeds: lists 1 twice"},
    {"seed_not_integer", "name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}}\nseeds: [1, x]\n", "seeds: must be an integer"},
    {"negative_gpus", "name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}}\nresources: {gpus: -1}\n", "resources.gpus: must be an integer in [0, 64]"},
    {"unknown_resource", "name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}}\nresources: {tpus: 1}\n", "resources.tpus: unknown key"},
    {"priority_range", "name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}}\npriority: 5000\n", "priority: must be an integer in [0, 1000]"},
    {"grid_too_big", "name: s\ndataset: d\nparameters: {method: {values: [pre_ln, geonorm]}}\nseeds: [1, 2, 3, 4, 5, 6]\n", "12 trials, above the limit of 10"},
    {"duplicate_axis", "name: s\ndataset: d\nparameters:\n  method: {values: [pre_ln]}\n  method: {values: [geonorm]}\n", "line 5: parameters.method: appears twice"},
    {"bad_name", "name: my sweep\ndataset: d\nparameters: {method: {values: [pre_ln]}}\n", "line 1: name: use letters"},
    {"axis_also_in_base", "name: s\ndataset: d\nbase: {scale: xs}\nparameters:\n  scale: {values: [xs]}\n", "line 5: parameters.scale: is also set in base"},
    {"bad_goal", "name: s\ndataset: d\nmetric: {goal: lowest}\nparameters: {method: {values: [pre_ln]}}\n", "metric.goal: must be minimize or maximize"},
    {"bf16_on_cpu", "name: s\ndataset: d\nbase: {dtype: bfloat16}\nparameters: {method: {values: [pre_ln]}}\n", "line 3: trial"},
    {"gang_accumulation", "name: s\ndataset: d\nbase: {gradient_accumulation_steps: 3}\nparameters: {method: {values: [pre_ln]}}\nresources: {nodes: 2}\n", "line 3: trial"},
    {"range_from_finalize", "name: s\ndataset: d\nbase: {batch_size: 0}\nparameters: {method: {values: [pre_ln]}}\n", "line 3: trial"},
    // Issue 11, item 1: n_head 0 divided by zero (SIGFPE) in the coordinator's check.
    {"division_by_zero_n_head", "name: s\ndataset: d\nbase: {n_head: 0}\nparameters: {method: {values: [pre_ln]}}\n", "line 3: trial {\"dataset\":\"d\",\"method\":\"pre_ln\",\"n_head\":0,\"seed\":1337}: config key 'n_head' must be in [1, 1024], got 0"},
    // Found by the fuzzer (tests/fuzz/corpus/sweep_spec): a byte that is not UTF-8 in a knob threw
    // out of the trainer's config check and aborted the coordinator.
    {"not_utf8", "name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}, learning_rate: {values: [\"\xce\"]}}\n", "sweep file: not UTF-8 text"},
    {"eval_unknown_task", "name: s\ndataset: d\neval: {tasks: [piqa, hellaswagg], data: zs}\nparameters: {method: {values: [pre_ln]}}\n", "config key 'eval_tasks': unknown task 'hellaswagg'"},
    {"eval_without_data", "name: s\ndataset: d\neval: {tasks: [piqa]}\nparameters: {method: {values: [pre_ln]}}\n", "line 3: eval: needs 'data'"},
    {"eval_every", "name: s\ndataset: d\neval: {tasks: [piqa], data: zs, every: hourly}\nparameters: {method: {values: [pre_ln]}}\n", "eval.every: must be final or checkpoints, got hourly"},
    {"eval_and_base", "name: s\ndataset: d\nbase: {eval_data: x}\neval: {tasks: [piqa], data: zs}\nparameters: {method: {values: [pre_ln]}}\n", "base also sets eval_data"},
    {"linked_length", "name: s\ndataset: d\nparameters:\n  scale: {values: [xs, s-cpu], with: {learning_rate: [1e-3]}}\n", "line 4: parameters.scale.with.learning_rate: has 1 values but scale has 2; linked lists must be equally long"},
    {"linked_also_in_base", "name: s\ndataset: d\nbase: {learning_rate: 1e-3}\nparameters:\n  scale: {values: [xs], with: {learning_rate: [1e-3]}}\n", "parameters.scale.with.learning_rate: is already set by base"},
    {"linked_then_axis", "name: s\ndataset: d\nparameters:\n  scale: {values: [xs], with: {learning_rate: [1e-3]}}\n  learning_rate: {values: [2e-3]}\n", "line 5: parameters.learning_rate: is already linked"},
    {"linked_bad_value", "name: s\ndataset: d\nparameters:\n  scale: {values: [xs], with: {learning_rate: [fast]}}\n", "config key 'learning_rate' must be a number"},
    {"linked_not_a_list", "name: s\ndataset: d\nparameters:\n  scale: {values: [xs, S], with: {learning_rate: 1e-3}}\n", "with.learning_rate: must be a list of 2 values"},
    {"unknown_recipe", "name: s\ndataset: d\nbase: {recipe: papper}\nparameters: {method: {values: [pre_ln]}}\nresources: {gpus: 1}\n", "config key 'recipe' must be one of paper"},
    {"recipe_cpu_scale", "name: s\ndataset: d\nbase: {recipe: paper, dtype: float32}\nparameters: {scale: {values: [xs]}}\n", "line 3: trial {\"dataset\":\"d\",\"dtype\":\"float32\",\"method\":\"pre_ln\",\"recipe\":\"paper\",\"scale\":\"xs\"}: config key 'recipe' paper sets learning_rate and min_lr per scale for S, M, L only; scale \"xs\" needs them set explicitly"},
    {"loops_zero", "name: s\ndataset: d\nparameters:\n  loops: {values: [1, 0]}\n", "config key 'loops' must be in [1, 64], got 0"},
    {"per_loop_loss_unlooped", "name: s\ndataset: d\nbase: {per_loop_loss: true}\nparameters: {method: {values: [pre_ln]}}\n", "config key 'per_loop_loss' needs loops >= 2"},
    {"loop_weights_count", "name: s\ndataset: d\nbase: {loops: 3, per_loop_loss: true, loop_loss_weights: \"1,2\"}\nparameters: {method: {values: [pre_ln]}}\n", "has 2 weights for loops = 3"},
    {"bad_readout", "name: s\ndataset: d\nparameters:\n  readout: {values: [batchnorm]}\n", "config key 'readout' must be layernorm, rmsnorm or scale_visible"},
    {"readout_vs_final_norm", "name: s\ndataset: d\nbase: {final_norm: none, readout: layernorm}\nparameters: {method: {values: [pre_ln]}}\n", "'readout' (layernorm) and 'final_norm' (none) disagree"},
    {"freeze_without_autonorm", "name: s\ndataset: d\nbase: {gate_freeze_step: 10}\nparameters: {method: {values: [pre_ln]}}\n", "config key 'gate_freeze_step' is for method autonorm"},
    {"division_by_zero_axis", "name: s\ndataset: d\nparameters:\n  scale: {values: [xs]}\n  n_head: {values: [0, 4]}\n", "line 5: trial"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(All, MalformedSweepTest, testing::ValuesIn(kMalformed),
                         [](const testing::TestParamInfo<Malformed>& info) {
                           return std::string(info.param.name);
                         });

// Issue 11, item 9: 4 axes x 300 values (a 5 KB file, 8.1e9 grid points) is refused at the
// limit without building the grid (before, every point was allocated first: memory ran out).
TEST(SweepExpandTest, ResourceBoundsAHugeGridIsRefusedWithoutBuildingIt) {
  std::string yaml = "name: huge\ndataset: d\nparameters:\n";
  for (const char* key : {"learning_rate", "min_lr", "weight_decay", "grad_clip"}) {
    yaml += std::string("  ") + key + ": {values: [";
    for (int i = 1; i <= 300; ++i) yaml += (i > 1 ? ", " : "") + std::to_string(i * 1e-5);
    yaml += "]}\n";
  }
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(yaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const absl::Status status = ExpandSweep(*spec).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("trials, above the limit of 100000"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace spheret

namespace spheret {
namespace {

// Truncations and byte flips of a valid file: each is parsed and expanded without throwing or
// crashing, and is either accepted or refused with InvalidArgument.
TEST(SweepSpecTest, NeverCrashesOnMangledFiles) {
  const std::string valid = kDepthAblation;
  std::vector<std::string> inputs;
  for (size_t n = 0; n <= valid.size(); n += 3) inputs.push_back(valid.substr(0, n));
  uint32_t state = 12345;
  const std::string alphabet = "{}[]:,-'\"\n #&*!|>%@`\t0.e";
  for (int i = 0; i < 2000; ++i) {
    std::string mangled = valid;
    for (int flips = 0; flips < 3; ++flips) {
      state = state * 1664525u + 1013904223u;
      const size_t at = state % mangled.size();
      state = state * 1664525u + 1013904223u;
      mangled[at] = alphabet[state % alphabet.size()];
    }
    inputs.push_back(mangled);
  }
  int accepted = 0;
  for (const std::string& input : inputs) {
    absl::StatusOr<SweepSpec> spec = ParseSweepSpec(input);
    absl::Status status = spec.status();
    if (spec.ok()) status = ExpandSweep(*spec).status();
    if (status.ok()) {
      ++accepted;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status << "\n" << input;
      EXPECT_FALSE(status.message().empty());
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, static_cast<int>(inputs.size()));
}

}  // namespace
}  // namespace spheret
