// A trial's depth, which bounds the layers of its per-layer Prometheus series: n_layer x loops as
// the trainer resolves its config, 0 for a config that does not resolve.
#include "server/sweep/trial_depth.h"

#include <gtest/gtest.h>

#include "config/trial_config.h"

namespace spheret {
namespace {

TEST(TrialDepthTest, IsNLayerTimesLoopsAsTheTrainerResolvesTheConfig) {
  EXPECT_EQ(TrialDepth(TrialConfig(R"({"dataset":"d","method":"pre_ln","scale":"xs","seed":1})")),
            4);
  EXPECT_EQ(TrialDepth(TrialConfig(R"({"dataset":"d","scale":"xs","n_layer":6})")), 6)
      << "explicit wins";
  EXPECT_EQ(TrialDepth(TrialConfig(R"({"dataset":"d","scale":"xs","loops":3})")), 12);
  EXPECT_EQ(TrialDepth(TrialConfig(R"({"dataset":"d","scale":"d12-cpu"})")), 12);
  EXPECT_EQ(TrialDepth(TrialConfig(R"({"dataset":"d"})")), 12) << "nanoGPT's default n_layer";
}

TEST(TrialDepthTest, IsZeroForAConfigThatDoesNotResolve) {
  EXPECT_EQ(TrialDepth(TrialConfig("not json")), 0);
  EXPECT_EQ(TrialDepth(TrialConfig("[1]")), 0);
  EXPECT_EQ(TrialDepth(TrialConfig(R"({"n_layer":0})")), 0);
  EXPECT_EQ(TrialDepth(TrialConfig(R"({"lerning_rate":1})")), 0);
}

}  // namespace
}  // namespace spheret
