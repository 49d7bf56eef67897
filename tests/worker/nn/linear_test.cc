// The linear layers' products through oneDNN (worker/nn/linear.h) against their twin, torch::linear
// (MKL's products): values and gradients of x, w and b in fp32 against the same layer in fp64, no
// further from it than the twin is; with and without a bias, rows that are (B, T, C) or (rows, C),
// sizes that fill a vector or leave it short; Mm with either operand transposed; bit for bit from
// one call to the next at one and two threads (a run and its resume make the same products); the
// inputs it declines (where it runs torch::linear); and a whole GPT's loss and gradients against
// the same GPT with MKL's products. Each case names the backend itself, so it runs whatever this
// CPU's default (CpuGemmBackend) is.
#include "worker/nn/linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "tests/worker/nn/gpt_twins.h"
#include "worker/nn/connection.h"
#include "worker/nn/gpt.h"

namespace spheret::nn {
namespace {

using torch::Tensor;
using twins::RelDiff;

// y = x w^T + b and the gradients of x, w (and b) under dy, through `gemm`.
std::vector<Tensor> RunLinear(const std::vector<Tensor>& inputs, const Tensor& dy, CpuGemm gemm) {
  std::vector<Tensor> p;  // x, w[, b]
  for (const Tensor& t : inputs) p.push_back(t.detach().clone().requires_grad_());
  const Tensor y = Linear(p[0], p[1], p.size() > 2 ? p[2] : Tensor(), gemm);
  std::vector<Tensor> out = torch::autograd::grad({y}, p, {dy});
  out.insert(out.begin(), y.detach());
  return out;
}

std::vector<Tensor> ToFloat(const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.to(torch::kFloat));
  return out;
}

class LinearTest : public twins::OneThreadTest {};

TEST_F(LinearTest, ValuesAndGradientsMatchFp64AsCloseAsTorchLinear) {
  // {x's shape, N, bias}: the xs preset's c_fc; a short vector everywhere; one row; no bias (the
  // head).
  const std::vector<std::tuple<std::vector<int64_t>, int64_t, bool>> cases = {
      {{4, 32, 128}, 512, true},
      {{3, 7, 37}, 19, true},
      {{1, 48}, 80, true},
      {{2, 9, 32}, 19, false}};
  for (const auto& [shape, n, bias] : cases) {
    const int64_t c = shape.back();
    std::vector<Tensor> exact_in = {torch::randn(shape, torch::kDouble),
                                    torch::randn({n, c}, torch::kDouble) / std::sqrt(c)};
    if (bias) exact_in.push_back(torch::randn({n}, torch::kDouble));
    std::vector<int64_t> out_shape = shape;
    out_shape.back() = n;
    const Tensor dy = torch::randn(out_shape, torch::kDouble);
    // In fp64 Linear runs torch::linear: the reference.
    const std::vector<Tensor> exact = RunLinear(exact_in, dy, CpuGemm::kOneDnn);
    const std::vector<Tensor> ours =
        RunLinear(ToFloat(exact_in), dy.to(torch::kFloat), CpuGemm::kOneDnn);
    const std::vector<Tensor> twin =
        RunLinear(ToFloat(exact_in), dy.to(torch::kFloat), CpuGemm::kMkl);
    const char* names[] = {"y", "dx", "dw", "db"};
    ASSERT_EQ(ours.size(), exact.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      ASSERT_EQ(ours[i].sizes(), exact[i].sizes()) << names[i];
      ASSERT_EQ(ours[i].scalar_type(), torch::kFloat) << names[i];
      // fp32 products of length up to 4 * 32: both within a few ulps of the fp64 values; ours no
      // further than twice the twin's error plus 1e-6 of the largest value.
      const double size = exact[i].abs().max().item<double>();
      const double our_error = (ours[i].to(torch::kDouble) - exact[i]).abs().max().item<double>();
      const double twin_error = (twin[i].to(torch::kDouble) - exact[i]).abs().max().item<double>();
      EXPECT_LE(our_error, 2 * twin_error + 1e-6 * size)
          << "x " << torch::IntArrayRef(shape) << ", N " << n << ": " << names[i];
      EXPECT_LT(RelDiff(ours[i], exact[i]), 1e-5) << names[i];
    }
  }
}

TEST_F(LinearTest, MmTakesTransposedOperands) {
  const Tensor a = torch::randn({37, 24}), b = torch::randn({24, 19});
  const Tensor exact = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
  const Tensor at = a.t().contiguous(), bt = b.t().contiguous();  // their .t() are views
  for (const auto& [x, y] :
       std::vector<std::pair<Tensor, Tensor>>{{a, b}, {at.t(), b}, {a, bt.t()}, {at.t(), bt.t()}}) {
    const Tensor ours = Mm(x, y, CpuGemm::kOneDnn);
    EXPECT_LT(RelDiff(ours, exact), 1e-6);
    EXPECT_EQ(ours.sizes(), exact.sizes());
  }
  // A strided view that is neither: copied on the way in, the same values.
  const Tensor wide = torch::randn({37, 48});
  const Tensor every_other = wide.slice(1, 0, 48, 2);  // (37, 24), column stride 2
  EXPECT_LT(RelDiff(Mm(every_other, b, CpuGemm::kOneDnn),
                    torch::mm(every_other.to(torch::kDouble), b.to(torch::kDouble))),
            1e-6);
}

TEST_F(LinearTest, RepeatsBitForBitAtOneAndTwoThreads) {
  const std::vector<Tensor> in = {torch::randn({4, 64, 128}), torch::randn({384, 128}) / 11,
                                  torch::randn({384})};
  const Tensor dy = torch::randn({4, 64, 384});
  for (const int threads : {1, 2}) {
    at::set_num_threads(threads);
    const std::vector<Tensor> first = RunLinear(in, dy, CpuGemm::kOneDnn);
    const std::vector<Tensor> second = RunLinear(in, dy, CpuGemm::kOneDnn);
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_TRUE(torch::equal(first[i], second[i])) << threads << " thread(s), output " << i;
    }
  }
  at::set_num_threads(1);
}

TEST_F(LinearTest, DeclinedInputsRunTorchLinear) {
  const Tensor w = torch::randn({19, 24}), b = torch::randn({19});
  // Each runs torch::linear: the same bits as torch::linear, and a graph it can differentiate
  // twice where torch::linear can.
  const Tensor x64 = torch::randn({5, 24}, torch::kDouble);
  EXPECT_TRUE(
      torch::equal(Linear(x64, w.to(torch::kDouble), b.to(torch::kDouble), CpuGemm::kOneDnn),
                   torch::linear(x64, w.to(torch::kDouble), b.to(torch::kDouble))));
  const Tensor strided = torch::randn({24, 5}).t();  // not contiguous
  EXPECT_TRUE(torch::equal(Linear(strided, w, b, CpuGemm::kOneDnn), torch::linear(strided, w, b)));
  const Tensor x = torch::randn({5, 24});
  EXPECT_TRUE(torch::equal(Linear(x, w, b, CpuGemm::kMkl), torch::linear(x, w, b)));
  const Tensor empty = torch::randn({0, 24});
  EXPECT_EQ(Linear(empty, w, b, CpuGemm::kOneDnn).sizes(), torch::IntArrayRef({0, 19}));
  {
    CompositeModeGuard composite;  // Jacobians: twice differentiable
    const Tensor xg = x.clone().requires_grad_();
    const Tensor y = Linear(xg, w.clone().requires_grad_(), b, CpuGemm::kOneDnn);
    const Tensor g = torch::autograd::grad({y.pow(2).sum()}, {xg}, {}, true, true)[0];
    EXPECT_TRUE(g.requires_grad());
  }
}

// A whole GPT (fused paths on) with this process's products against the same GPT in fp64 (where
// every product is torch::linear's), as close as the same GPT with MKL's products (SPHERET_CPU_GEMM
// cannot change within a process, so MKL's GPT is this GPT's fp32 error on an Intel CPU): loss,
// logits and every gradient within 1e-5 (scalars 1e-4) of fp64.
TEST_F(LinearTest, GptMatchesTheGptInFp64) {
  for (Method method : {Method::kPreLn, Method::kGeoNorm}) {
    const GptConfig config = twins::TinyGpt(method, /*n_layer=*/2, /*block_size=*/40);
    const std::vector<Tensor> ours = twins::GptGradients(config, torch::kFloat);
    const std::vector<Tensor> exact = twins::GptGradients(config, torch::kDouble);
    ASSERT_EQ(ours.size(), exact.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      ASSERT_TRUE(ours[i].defined() && exact[i].defined()) << i;
      EXPECT_LT(RelDiff(ours[i], exact[i]), ours[i].numel() == 1 ? 1e-4 : 1e-5)
          << MethodId(method) << " tensor " << i
          << (CpuGemmBackend() == CpuGemm::kOneDnn ? " (oneDNN)" : " (MKL)");
    }
  }
}

}  // namespace
}  // namespace spheret::nn
