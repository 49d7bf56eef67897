// The MLP's fused bias add and GELU (worker/nn/gelu_fused.h) against its unfused twin,
// torch::gelu(a + b): values and gradients in fp32 against the fp64 exact GELU, no further from it
// than the twin plus the approximation's bound, over widths that fill the 16 lanes or leave the
// last vector short and row counts that fill the blocks or not; bit for bit at one and two threads;
// the inputs it declines (where it runs the twin); and a GPT with fused_mlp against the same GPT
// without. On a CPU without AVX-512 every case runs the twin (BiasGeluFusable is false) and the
// comparisons hold trivially; the first test says so.
#include "worker/nn/gelu_fused.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "tests/worker/nn/gpt_twins.h"
#include "worker/nn/gpt.h"

namespace spheret::nn {
namespace {

using torch::Tensor;
using twins::RelDiff;

// g, da and db under the upstream gradient dg, fused (BiasGelu) or twin.
std::vector<Tensor> RunGelu(const Tensor& a0, const Tensor& b0, const Tensor& dg, bool fused) {
  const Tensor a = a0.detach().clone().requires_grad_();
  const Tensor b = b0.detach().clone().requires_grad_();
  const Tensor g = fused ? BiasGelu(a, b) : torch::gelu(a + b);
  const std::vector<Tensor> grads = torch::autograd::grad({g}, {a, b}, {dg});
  return {g.detach(), grads[0], grads[1]};
}

class GeluFusedTest : public twins::OneThreadTest {};

TEST_F(GeluFusedTest, ValuesAndGradientsMatchTheExactGelu) {
  if (!BiasGeluFusable(torch::zeros({2, 16}), torch::zeros({16}))) {
    GTEST_SKIP() << "this CPU has no AVX-512: BiasGelu runs torch::gelu(a + b)";
  }
  // {rows, width}: whole vectors and blocks; a short last vector; a short last block; one row.
  const std::vector<std::vector<int64_t>> shapes = {{128, 64}, {70, 37}, {3, 5, 48}, {1, 512}};
  for (const std::vector<int64_t>& shape : shapes) {
    const int64_t n = shape.back();
    // Up to |x| ~ 12: both of GELU's tails, and exp(-x^2 / 2) down past fp32's normal range.
    const Tensor a = torch::randn(shape, torch::kDouble) * 4;
    const Tensor b = torch::randn({n}, torch::kDouble);
    const Tensor dg = torch::randn(shape, torch::kDouble);
    const std::vector<Tensor> exact = RunGelu(a, b, dg, false);
    const std::vector<Tensor> fused =
        RunGelu(a.to(torch::kFloat), b.to(torch::kFloat), dg.to(torch::kFloat), true);
    const std::vector<Tensor> twin =
        RunGelu(a.to(torch::kFloat), b.to(torch::kFloat), dg.to(torch::kFloat), false);
    for (size_t i = 0; i < exact.size(); ++i) {
      // Elementwise, against the twin's own fp32 error plus the approximation's 1.5e-7 |x| / 2
      // (|x| <= ~14 here) on g, and on da and db with dg's size.
      const Tensor fused_error = (fused[i].to(torch::kDouble) - exact[i]).abs().max();
      const Tensor twin_error = (twin[i].to(torch::kDouble) - exact[i]).abs().max();
      const double scale = i == 2 ? static_cast<double>(a.numel() / n) : 1.0;  // db sums the rows
      EXPECT_LE(fused_error.item<double>(), 2 * twin_error.item<double>() + 4e-6 * scale)
          << "shape " << a.sizes()
          << (i == 0   ? ": g"
              : i == 1 ? ": da"
                       : ": db");
    }
  }
}

TEST_F(GeluFusedTest, RepeatsBitForBitAtAnyThreadCount) {
  const Tensor a = torch::randn({300, 80}), b = torch::randn({80}), dg = torch::randn({300, 80});
  const std::vector<Tensor> one = RunGelu(a, b, dg, true);
  at::set_num_threads(2);
  const std::vector<Tensor> two = RunGelu(a, b, dg, true);
  at::set_num_threads(1);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
}

TEST_F(GeluFusedTest, DeclinesWhatItDoesNotTakeAndRunsTheTwin) {
  const Tensor a = torch::randn({6, 16}), b = torch::randn({16});
  EXPECT_FALSE(BiasGeluFusable(a.to(torch::kDouble), b.to(torch::kDouble)));
  EXPECT_FALSE(BiasGeluFusable(a.t(), b));                  // strided
  EXPECT_FALSE(BiasGeluFusable(a, torch::randn({6})));      // b is not a's width
  EXPECT_FALSE(BiasGeluFusable(a, torch::randn({1, 16})));  // b is not a vector
  // Where it declines, the result is the twin's, bit for bit.
  const Tensor ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(BiasGelu(ad, bd), torch::gelu(ad + bd)));
  EXPECT_TRUE(torch::equal(BiasGelu(a.t(), torch::randn({6}).fill_(0.5)),
                           torch::gelu(a.t() + torch::full({6}, 0.5))));
}

TEST_F(GeluFusedTest, GptWithFusedMlpMatchesTheUnfusedGpt) {
  for (Method method : {Method::kPreLn, Method::kGeoNorm}) {
    GptConfig fused_config = twins::TinyGpt(method, /*n_layer=*/2, /*block_size=*/40);
    GptConfig twin_config = fused_config;
    fused_config.fused_mlp = true;
    twin_config.fused_mlp = false;
    const std::vector<Tensor> fused = twins::GptGradients(fused_config, torch::kFloat);
    const std::vector<Tensor> twin = twins::GptGradients(twin_config, torch::kFloat);
    ASSERT_EQ(fused.size(), twin.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      ASSERT_TRUE(fused[i].defined() && twin[i].defined()) << i;
      // Scalars (a step size's gradient) sum over every row with cancellation: 1e-4 in fp32.
      EXPECT_LT(RelDiff(fused[i], twin[i]), fused[i].numel() == 1 ? 1e-4 : 1e-5)
          << MethodId(method) << " tensor " << i;
    }
  }
}

}  // namespace
}  // namespace spheret::nn
