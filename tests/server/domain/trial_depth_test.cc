// A trial's depth, which bounds the layers of its per-layer Prometheus series: n_layer x loops as
// the trainer resolves its config, 0 for a config that does not resolve.
#include "server/domain/trial_depth.h"

#include <gtest/gtest.h>

namespace spheret {
namespace {

TEST(TrialDepthTest, IsNLayerTimesLoopsAsTheTrainerResolvesTheConfig) {
  EXPECT_EQ(TrialDepth(R"({"dataset":"d","method":"pre_ln","scale":"xs","seed":1})"), 4);
  EXPECT_EQ(TrialDepth(R"({"dataset":"d","scale":"xs","n_layer":6})"), 6) << "explicit wins";
  EXPECT_EQ(TrialDepth(R"({"dataset":"d","scale":"xs","loops":3})"), 12);
  EXPECT_EQ(TrialDepth(R"({"dataset":"d","scale":"d12-cpu"})"), 12);
  EXPECT_EQ(TrialDepth(R"({"dataset":"d"})"), 12) << "nanoGPT's default n_layer";
}

TEST(TrialDepthTest, IsZeroForAConfigThatDoesNotResolve) {
  EXPECT_EQ(TrialDepth("not json"), 0);
  EXPECT_EQ(TrialDepth("[1]"), 0);
  EXPECT_EQ(TrialDepth(R"({"n_layer":0})"), 0);
  EXPECT_EQ(TrialDepth(R"({"lerning_rate":1})"), 0);
}

// What bounds the per-layer rows a trial's worker may store and export (issue 28, item 8).
TEST(TrialDepthTest, DiagRowsWithinDepthFollowTheModelsLayers) {
  EXPECT_TRUE(DiagRowWithinDepth(12, 12, "attn"));
  EXPECT_TRUE(DiagRowWithinDepth(12, 1, "mlp"));
  EXPECT_FALSE(DiagRowWithinDepth(12, 13, "mlp"));
  EXPECT_FALSE(DiagRowWithinDepth(12, 0, "attn"));
  EXPECT_TRUE(DiagRowWithinDepth(12, 0, "model"));
  EXPECT_FALSE(DiagRowWithinDepth(12, 1, "model"));
  EXPECT_TRUE(DiagRowWithinDepth(12, 24, "dyadic"));
  EXPECT_FALSE(DiagRowWithinDepth(12, 25, "dyadic"));
  EXPECT_FALSE(DiagRowWithinDepth(0, 1, "attn")) << "unknown depth";
  EXPECT_FALSE(DiagRowWithinDepth(12, 1, "other"));
}

}  // namespace
}  // namespace spheret
