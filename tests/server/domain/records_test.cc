// The domain records: the layers of a model of a given depth (what bounds a trial's per-layer
// rows).
#include "server/domain/records.h"

#include <gtest/gtest.h>

namespace spheret {
namespace {

// What bounds the per-layer rows a trial's worker may store and export (issue 28, item 8).
TEST(DepthBoundsTest, DiagRowsWithinDepthFollowTheModelsLayers) {
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
