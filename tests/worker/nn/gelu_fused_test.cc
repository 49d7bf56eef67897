// The MLP's fused bias add and GELU (worker/nn/gelu_fused.h) against its unfused twin,
// torch::gelu(a + b): values and gradients in fp32 against the fp64 exact GELU, no further from it
// than the twin plus the approximation's bound, over widths that fill the 16 lanes or leave the
// last vector short and row counts that fill the blocks or not; bit for bit at one and two threads;
// the inputs it declines (where it runs the twin); and a GPT with fused_mlp against the same GPT
// without. LinearGelu (c_fc's product inside, its buffer reused for da), in a whole MLP, against
// torch::linear and torch::gelu the same ways, and with the graph kept for a second backward
// (where da must not take the product's place). On a CPU without AVX-512 every case runs the twin
// (BiasGeluFusable is false) and the comparisons hold trivially; the first test says so.
#include "worker/nn/gelu_fused.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <tuple>
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

// The MLP's output y = GELU(x w1^T + b1) w2^T + b2 and the gradients of x, w1, b1, w2, b2 under
// dy, fused (LinearGelu, then torch::linear) or twin (torch::linear, torch::gelu).
std::vector<Tensor> RunMlp(const std::vector<Tensor>& inputs, const Tensor& dy, bool fused) {
  std::vector<Tensor> p;  // x, w1, b1, w2, b2
  for (const Tensor& t : inputs) p.push_back(t.detach().clone().requires_grad_());
  const Tensor hidden =
      fused ? LinearGelu(p[0], p[1], p[2]) : torch::gelu(torch::linear(p[0], p[1], p[2]));
  const Tensor y = torch::linear(hidden, p[3], p[4]);
  std::vector<Tensor> out = torch::autograd::grad({y}, p, {dy});
  out.insert(out.begin(), y.detach());
  return out;
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

// x (..., C), w1 (N, C), b1 (N), w2 (C', N), b2 (C'), with |x w1^T + b1| up to ~12.
std::vector<Tensor> MlpInputs(std::vector<int64_t> shape, int64_t n, int64_t c_out,
                              torch::Dtype dtype) {
  const int64_t c = shape.back();
  return {torch::randn(shape, dtype), torch::randn({n, c}, dtype) * (3 / std::sqrt(c)),
          torch::randn({n}, dtype), torch::randn({c_out, n}, dtype) / std::sqrt(n),
          torch::randn({c_out}, dtype)};
}

TEST_F(GeluFusedTest, MlpMatchesTheExactGelu) {
  const std::vector<Tensor> probe = MlpInputs({2, 8}, 16, 8, torch::kFloat);
  if (!LinearGeluFusable(probe[0], probe[1], probe[2])) {
    GTEST_SKIP() << "this CPU has no AVX-512: LinearGelu runs torch::gelu(torch::linear(x, w, b))";
  }
  // {x's shape, N, C'}: whole vectors and blocks; a short last vector and block; one row.
  const std::vector<std::tuple<std::vector<int64_t>, int64_t, int64_t>> cases = {
      {{128, 32}, 64, 32}, {{2, 35, 24}, 37, 24}, {{1, 48}, 80, 16}};
  const char* names[] = {"y", "dx", "dw1", "db1", "dw2", "db2"};
  for (const auto& [shape, n, c_out] : cases) {
    const std::vector<Tensor> exact_in = MlpInputs(shape, n, c_out, torch::kDouble);
    std::vector<int64_t> out_shape = shape;
    out_shape.back() = c_out;
    const Tensor dy = torch::randn(out_shape, torch::kDouble);
    std::vector<Tensor> in;
    for (const Tensor& t : exact_in) in.push_back(t.to(torch::kFloat));
    const std::vector<Tensor> exact = RunMlp(exact_in, dy, false);
    const std::vector<Tensor> fused = RunMlp(in, dy.to(torch::kFloat), true);
    const std::vector<Tensor> twin = RunMlp(in, dy.to(torch::kFloat), false);
    for (size_t i = 0; i < exact.size(); ++i) {
      ASSERT_EQ(fused[i].sizes(), exact[i].sizes()) << names[i];
      // Against the twin's own fp32 error, plus the approximation's (1.5e-7 |a| / 2 on g and
      // GELU', summed through the products): 1e-6 of the largest exact value.
      const double fused_error =
          (fused[i].to(torch::kDouble) - exact[i]).abs().max().item<double>();
      const double twin_error = (twin[i].to(torch::kDouble) - exact[i]).abs().max().item<double>();
      const double size = exact[i].abs().max().item<double>();
      EXPECT_LE(fused_error, 2 * twin_error + 1e-6 * size)
          << "x " << in[0].sizes() << ", N " << n << ": " << names[i];
    }
  }
}

TEST_F(GeluFusedTest, MlpWithTheGraphKeptGivesTheSameGradientsTwice) {
  const std::vector<Tensor> in = MlpInputs({2, 70, 24}, 40, 24, torch::kFloat);
  const Tensor dy = torch::randn({2, 70, 24});
  std::vector<Tensor> p, before;
  for (const Tensor& t : in) {
    p.push_back(t.clone().requires_grad_());
    before.push_back(t.clone());
  }
  // Freed graph: da takes the product's place. Kept graph: it must not, or the second backward
  // would read da as the product.
  const std::vector<Tensor> freed = RunMlp(in, dy, true);
  const Tensor y = torch::linear(LinearGelu(p[0], p[1], p[2]), p[3], p[4]);
  const std::vector<Tensor> first = torch::autograd::grad({y}, p, {dy}, true);
  const std::vector<Tensor> second = torch::autograd::grad({y}, p, {dy}, false);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_TRUE(torch::equal(first[i], second[i])) << i;
    EXPECT_TRUE(torch::equal(first[i], freed[i + 1])) << i;
    EXPECT_TRUE(torch::equal(p[i].detach(), before[i])) << i;  // only its own buffers written
  }
}

TEST_F(GeluFusedTest, RepeatsBitForBitAtAnyThreadCount) {
  const Tensor a = torch::randn({300, 80}), b = torch::randn({80}), dg = torch::randn({300, 80});
  const std::vector<Tensor> one = RunGelu(a, b, dg, true);
  at::set_num_threads(2);
  const std::vector<Tensor> two = RunGelu(a, b, dg, true);
  at::set_num_threads(1);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
  const std::vector<Tensor> in = MlpInputs({300, 24}, 80, 24, torch::kFloat);
  const Tensor dy = torch::randn({300, 24});
  const std::vector<Tensor> mlp_one = RunMlp(in, dy, true);
  at::set_num_threads(2);
  const std::vector<Tensor> mlp_two = RunMlp(in, dy, true);
  at::set_num_threads(1);
  for (size_t i = 0; i < mlp_one.size(); ++i) {
    EXPECT_TRUE(torch::equal(mlp_one[i], mlp_two[i])) << "LinearGelu " << i;
  }
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
  const std::vector<Tensor> m = MlpInputs({5, 8}, 16, 8, torch::kFloat);  // x, w1, b1, w2, b2
  const auto fusable = [&](std::vector<Tensor> v) { return LinearGeluFusable(v[0], v[1], v[2]); };
  const auto with = [&](size_t i, const Tensor& t) {
    std::vector<Tensor> v = m;
    v[i] = t;
    return v;
  };
  EXPECT_FALSE(fusable(with(0, m[0].t().contiguous().t())));  // strided x
  EXPECT_FALSE(fusable(with(1, torch::randn({8, 16}).t())));  // strided w1
  EXPECT_FALSE(fusable(with(1, torch::randn({16, 7}))));      // w1 is not x's width
  EXPECT_FALSE(fusable(with(2, torch::randn({8}))));          // b1 is not w1's rows
  EXPECT_FALSE(fusable(with(2, Tensor())));                   // no bias
  std::vector<Tensor> md;
  for (const Tensor& t : m) md.push_back(t.to(torch::kDouble));
  EXPECT_FALSE(fusable(md));
  EXPECT_TRUE(torch::equal(LinearGelu(md[0], md[1], md[2]),
                           torch::gelu(torch::linear(md[0], md[1], md[2]))));
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
