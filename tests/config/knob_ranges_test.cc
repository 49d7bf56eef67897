// Issue 44, item 11: every numeric knob has a sane range (config/train_config_checks.h), and a
// value past it is refused naming the knob and the range (learning_rate 1e308 and grad_clip 7e307
// passed the trainer's checks before).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "config/train_config_checks.h"

namespace spheret {
namespace {

using nlohmann::json;

// FinalizeConfig's message for the xs preset with `key` set to `value` ("" when accepted).
std::string Refusal(const std::string& key, const json& value) {
  TrainConfig config;
  EXPECT_TRUE(ApplyConfigJson(json{{"scale", "xs"}}, &config).ok());
  const absl::Status applied = ApplyConfigJson(json{{key, value}}, &config);
  if (!applied.ok()) return std::string(applied.message());
  return std::string(FinalizeConfig(&config).message());
}

TEST(KnobRanges, HugeRealValuesAreRefusedNamingTheKnobAndItsRange) {
  const std::vector<std::pair<std::pair<std::string, double>, std::string>> cases = {
      {{"learning_rate", 1e308}, "config key 'learning_rate' must be in (0, 10], got 1e+308"},
      {{"grad_clip", 7e307}, "config key 'grad_clip' must be in [0, 1000000], got 7e+307"},
      {{"min_lr", 11}, "config key 'min_lr' must be in [0, 10], got 11"},
      {{"weight_decay", 1e300}, "config key 'weight_decay' must be in [0, 10], got 1e+300"},
      {{"divergence_loss", 1e308},
       "config key 'divergence_loss' must be in (0, 1000000000], got 1e+308"},
      {{"spike_margin", 1e10},
       "config key 'spike_margin' must be in (0, 1000000000], got 10000000000"},
      {{"norm_penalty", 1e4}, "config key 'norm_penalty' must be in [0, 1000], got 10000"},
      {{"gate_temp_end", 1e-300},
       "config key 'gate_temp_end' must be in [0.001, 1000], got 1e-300"},
      {{"gate_temp_start", 1e300},
       "config key 'gate_temp_start' must be in [0.001, 1000], got 1e+300"},
      {{"p", 1e308}, "config key 'p' must be in (0, 64], got 1e+308"},
      {{"ngpt_alpha_init", 1e308}, "config key 'ngpt_alpha_init' must be in (0, 1000], got 1e+308"},
  };
  for (const auto& [assignment, message] : cases) {
    EXPECT_EQ(Refusal(assignment.first, assignment.second), message) << assignment.first;
  }
  const std::vector<std::pair<std::string, double>> at_the_bounds = {
      {"learning_rate", kMaxLearningRate}, {"grad_clip", kMaxGradClip},      {"grad_clip", 0},
      {"divergence_loss", kMaxLossBound},  {"gate_temp_end", kMinGateTemp},  {"p", kMaxP},
      {"weight_decay", kMaxWeightDecay},   {"norm_penalty", kMaxNormPenalty}};
  for (const auto& [key, value] : at_the_bounds) {
    EXPECT_EQ(Refusal(key, value), "") << key << " = " << value << " is in range";
  }
}

TEST(KnobRanges, StepCountsAndIntervalsStopAtMaxSteps) {
  EXPECT_EQ(Refusal("max_iters", int64_t{1} << 62),
            "config key 'max_iters' must be in [0, 1000000000000], got 4.61169e+18");
  EXPECT_EQ(Refusal("diag_interval", kMaxSteps + 1),
            "config key 'diag_interval' must be in [0, 1000000000000], got 1000000000001");
}

// Each numeric key of the trainer, set far past any sane value, is refused with its name in the
// message; only `seed` takes any non-negative int64 (sweeps draw and list seeds up to INT64_MAX).
TEST(KnobRanges, EveryNumericKnobHasAnUpperBound) {
  const TrainConfig defaults;
  int checked = 0;
  for (const std::string& key : ConfigKeys()) {
    const json value = ConfigValue(defaults, key);
    if (!value.is_number() || key == "seed") continue;
    const json huge =
        value.is_number_integer() ? json(std::numeric_limits<int64_t>::max()) : json(1e300);
    const std::string message = Refusal(key, huge);
    EXPECT_NE(message.find(key), std::string::npos) << key << " = " << huge << ": " << message;
    ++checked;
  }
  EXPECT_GE(checked, 35) << "the numeric knobs of ConfigKeys()";
  EXPECT_EQ(Refusal("seed", std::numeric_limits<int64_t>::max()), "");
}

}  // namespace
}  // namespace spheret
