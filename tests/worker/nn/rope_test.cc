// Rotary position embedding (worker/nn/rope.h) against the loop formula, and its invariants.
#include "worker/nn/rope.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>

#include "tests/worker/nn/reference_loops.h"

namespace spheret::nn {
namespace {

using reference::Dot;
using reference::ExpectNear;
using reference::RopeLoop;
using reference::Values;

TEST(Rope, RotatesEachPairByPositionTimesFrequency) {
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({2, 2, 5, 6}, torch::kDouble);  // (B, nh, T, hs)
  const torch::Tensor y = ApplyRope(x);
  ASSERT_EQ(y.sizes(), x.sizes());
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t t = 0; t < 5; ++t) {
        ExpectNear(Values(y[b][h][t]), RopeLoop(Values(x[b][h][t]), t), 1e-13, "rope");
      }
    }
  }
  ExpectNear(Values(y.select(2, 0)), Values(x.select(2, 0)), 0, "position 0 is the identity");
}

TEST(Rope, InnerProductDependsOnlyOnTheOffset) {
  torch::manual_seed(2);
  const int64_t t_len = 12, hs = 8;
  const torch::Tensor q = torch::randn({hs}, torch::kDouble),
                      k = torch::randn({hs}, torch::kDouble);
  // Every position holds the same q (and k), so row m of the result is R_m q.
  const torch::Tensor rq = ApplyRope(q.expand({1, 1, t_len, hs}).contiguous())[0][0];
  const torch::Tensor rk = ApplyRope(k.expand({1, 1, t_len, hs}).contiguous())[0][0];
  auto score = [&](int64_t m, int64_t n) { return Dot(Values(rq[m]), Values(rk[n])); };
  for (int64_t offset : {0, 1, 3, 7}) {
    for (int64_t n = 1; n + offset < t_len; ++n) {
      EXPECT_NEAR(score(n + offset, n), score(offset, 0), 1e-12) << "offset " << offset;
    }
  }
  EXPECT_NEAR(score(0, 0), Dot(Values(q), Values(k)), 1e-12);
  EXPECT_GT(std::abs(score(3, 0) - score(4, 0)), 1e-3);  // the offset does matter
  for (int64_t m = 0; m < t_len; ++m) {
    EXPECT_NEAR(std::sqrt(Dot(Values(rq[m]), Values(rq[m]))), q.norm().item<double>(), 1e-12);
  }
}

TEST(Rope, RefusesAnOddHeadSize) {
  EXPECT_THROW(ApplyRope(torch::zeros({1, 1, 2, 3})), c10::Error);
}

}  // namespace
}  // namespace spheret::nn
