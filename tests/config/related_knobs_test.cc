// autonorm_mode and inter_loop_norm (docs/methods.md §3): spelled, round-tripped, and refused
// where they mean nothing, with the key named.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "config/train_config.h"

namespace spheret {
namespace {

// The message of FinalizeConfig after `overrides` on preset xs ("" when accepted).
std::string Finalized(const std::vector<std::string>& overrides, TrainConfig* out = nullptr) {
  TrainConfig config;
  EXPECT_TRUE(ApplyConfigOverride("scale=xs", &config).ok());
  for (const std::string& set : overrides) {
    if (absl::Status error = ApplyConfigOverride(set, &config); !error.ok()) {
      return std::string(error.message());
    }
  }
  const absl::Status status = FinalizeConfig(&config);
  if (out != nullptr) *out = config;
  return std::string(status.message());
}

TEST(RelatedKnobs, AutoNormModeAndInterLoopNormParseAndRoundTrip) {
  TrainConfig config;
  ASSERT_EQ(Finalized({"method=autonorm", "autonorm_mode=random_fixed", "loops=2",
                       "inter_loop_norm=sphere"},
                      &config),
            "");
  EXPECT_EQ(config.connection.autonorm_mode, AutoNormMode::kRandomFixed);
  EXPECT_EQ(config.inter_loop_norm, InterLoopNorm::kSphere);
  const nlohmann::json json = ConfigToJson(config);
  EXPECT_EQ(json["autonorm_mode"], "random_fixed");
  EXPECT_EQ(json["inter_loop_norm"], "sphere");
  TrainConfig again;
  ASSERT_TRUE(ApplyConfigJson(json, &again).ok());
  EXPECT_EQ(ConfigToJson(again), json);
  // The defaults: today's gate and the plain looped model.
  const nlohmann::json defaults = ConfigToJson(TrainConfig{});
  EXPECT_EQ(defaults["autonorm_mode"], "learned");
  EXPECT_EQ(defaults["inter_loop_norm"], "none");
  EXPECT_EQ(Finalized({"method=autonorm", "autonorm_mode=random"}), "");
  for (const char* norm : {"none", "layernorm", "rmsnorm", "sphere"}) {
    EXPECT_EQ(Finalized({"loops=3", std::string("inter_loop_norm=") + norm}), "") << norm;
  }
}

TEST(RelatedKnobs, RefusedWhereTheyMeanNothing) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"method=autonorm", "autonorm_mode=uniform"},
       "config key 'autonorm_mode' must be one of learned, random, random_fixed, got \"uniform\""},
      {{"autonorm_mode=random"},
       "config key 'autonorm_mode' is for method autonorm, got method pre_ln"},
      {{"method=autonorm", "autonorm_mode=random", "gate_freeze_step=10"},
       "config key 'gate_freeze_step' is for autonorm_mode learned (a random gate has nothing to "
       "freeze)"},
      {{"loops=2", "inter_loop_norm=l2"},
       "config key 'inter_loop_norm' must be one of none, layernorm, rmsnorm, sphere, got \"l2\""},
      {{"inter_loop_norm=sphere"},
       "config key 'inter_loop_norm' needs loops >= 2 (it acts between two loops)"},
      {{"method=ngpt", "loops=2", "inter_loop_norm=layernorm"},
       "config key 'inter_loop_norm' layernorm or rmsnorm is not for method ngpt: its hidden "
       "state stays on the unit sphere (sphere, a no-op there, or none)"},
  };
  for (const auto& [overrides, message] : cases) {
    EXPECT_EQ(Finalized(overrides), message) << overrides.back();
  }
  EXPECT_EQ(Finalized({"method=ngpt", "loops=2", "inter_loop_norm=sphere"}), "");
}

}  // namespace
}  // namespace spheret
