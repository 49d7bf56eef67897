// The causal attention from packed q, k, v (worker/nn/attention_fused.h) against its unfused twin,
// LibTorch's math attention on the split, transposed heads: values and gradients in fp32 and fp64
// over lengths that fill the blocks, leave the last one short, or fit in one; bit for bit at one
// and two threads; the inputs it declines; a GPT with fused_attention against the same GPT without;
// and a forward without gradients, which runs SDPA.
#include "worker/nn/attention_fused.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "tests/worker/nn/gpt_twins.h"
#include "worker/nn/attention_tiles.h"
#include "worker/nn/gpt.h"

namespace spheret::nn {
namespace {

using torch::Tensor;

// fp32: 1e-5 relative; fp64: 1e-12 (the same math, other summation orders).
double Tolerance(torch::ScalarType type) { return type == torch::kDouble ? 1e-12 : 1e-5; }

using twins::RelDiff;

// The twin: split qkv, heads (B, nh, T, hs), causal math attention, back to (B, T, C).
Tensor TwinAttention(const Tensor& qkv, int64_t n_head) {
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3;
  std::vector<Tensor> parts = qkv.split(c, 2);
  for (Tensor& part : parts) part = part.view({b, t, n_head, c / n_head}).transpose(1, 2);
  const Tensor y = std::get<0>(
      at::_scaled_dot_product_attention_math(parts[0], parts[1], parts[2], {}, 0.0, true));
  return y.transpose(1, 2).contiguous().view({b, t, c});
}

// y and the gradient of qkv under a random upstream gradient, fused (with the process's choice of
// products unless `gemm` is given) or twin.
std::vector<Tensor> RunAttention(const Tensor& qkv0, int64_t n_head, const Tensor& grad, bool fused,
                                 CpuGemm gemm = CpuGemmBackend()) {
  const Tensor qkv = qkv0.detach().clone().requires_grad_();
  const Tensor y = fused ? CausalAttentionFused(qkv, n_head, gemm) : TwinAttention(qkv, n_head);
  const Tensor dqkv = torch::autograd::grad({y}, {qkv}, {grad})[0];
  return {y.detach(), dqkv};
}

class AttentionFusedTest : public twins::OneThreadTest {};

TEST_F(AttentionFusedTest, ValuesAndGradientsMatchTheMathAttention) {
  struct Shape {
    int64_t batch, t, c, n_head;
  };
  // Lengths: one row; under, at and past one block; the last block short; the largest fused.
  // Heads of 8 take the BLAS products; in fp32 on a CPU with AVX-512, with products through oneDNN,
  // heads of 16 to 64 take the register tiles (attention_tiles.h), over lengths that end inside a
  // tile and a vector. Both choices of products run on any CPU.
  const std::vector<Shape> shapes = {{2, 1, 24, 3},   {3, 5, 24, 3},   {2, 64, 64, 2},
                                     {2, 70, 24, 3},  {1, 128, 64, 2}, {1, 256, 32, 1},
                                     {3, 1, 32, 1},   {2, 17, 64, 2},  {2, 37, 48, 3},
                                     {1, 200, 96, 2}, {2, 77, 128, 2}, {1, 250, 128, 2}};
  for (CpuGemm gemm : {CpuGemm::kMkl, CpuGemm::kOneDnn}) {
    for (torch::ScalarType type : {torch::kFloat, torch::kDouble}) {
      for (const Shape& s : shapes) {
        const auto options = torch::TensorOptions().dtype(type);
        const Tensor qkv = torch::randn({s.batch, s.t, 3 * s.c}, options);
        const Tensor grad = torch::randn({s.batch, s.t, s.c}, options);
        ASSERT_TRUE(AttentionFusable(qkv, s.n_head)) << s.t;
        const std::vector<Tensor> fused = RunAttention(qkv, s.n_head, grad, true, gemm);
        const std::vector<Tensor> twin = RunAttention(qkv, s.n_head, grad, false);
        for (size_t i = 0; i < fused.size(); ++i) {
          EXPECT_LT(RelDiff(fused[i], twin[i]), Tolerance(type))
              << (gemm == CpuGemm::kOneDnn ? "oneDNN " : "MKL ") << torch::toString(type) << " T "
              << s.t << " C " << s.c << " heads " << s.n_head << (i == 0 ? ": y" : ": dqkv");
        }
      }
    }
  }
}

// Logits 100 apart and more: exp of the shifted logits underflows, and the softmax is still as
// accurate as the math attention's: fp32 against the fp64 twin, at most twice the fp32 twin's
// error plus 1e-5. (With logits in the hundreds, fp32 rounding of the logits alone moves the
// gradients by ~1e-5, by an amount that depends on the BLAS's order of summation: on an AMD EPYC,
// where MKL takes its generic path, the fused dqkv was 7.2e-6 from fp64 and the twin's 3.5e-6. A
// softmax that lost its rows would be off by ~1.)
TEST_F(AttentionFusedTest, FarApartLogitsAreAsAccurateAsTheMathAttention) {
  const Tensor qkv = torch::randn({2, 40, 48}, torch::kDouble) * 12.0;  // logits ~ 12 * 12 * 8
  const Tensor grad = torch::randn({2, 40, 16}, torch::kDouble);
  const std::vector<Tensor> exact = RunAttention(qkv, 2, grad, false);
  const std::vector<Tensor> fused =
      RunAttention(qkv.to(torch::kFloat), 2, grad.to(torch::kFloat), true);
  const std::vector<Tensor> twin =
      RunAttention(qkv.to(torch::kFloat), 2, grad.to(torch::kFloat), false);
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_TRUE(torch::isfinite(fused[i]).all().item<bool>()) << i;
    EXPECT_LE(RelDiff(fused[i], exact[i]), 2 * RelDiff(twin[i], exact[i]) + 1e-5) << i;
  }
}

TEST_F(AttentionFusedTest, RegisterTilesTakeHeadsOf16To64WhereTheCpuHasAvx512) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  for (int64_t hs : {16, 32, 48, 64}) EXPECT_EQ(attention_tiles::Takes(hs), avx512) << hs;
  for (int64_t hs : {1, 8, 24, 80, 128}) EXPECT_FALSE(attention_tiles::Takes(hs)) << hs;
}

TEST_F(AttentionFusedTest, RepeatsBitForBitAtAnyThreadCount) {
  // Heads of 8 (the BLAS products) and of 16 (the BLAS, or the register tiles where the products
  // are oneDNN's and the CPU has AVX-512).
  for (CpuGemm gemm : {CpuGemm::kMkl, CpuGemm::kOneDnn}) {
    for (int64_t c : {32, 64}) {
      const Tensor qkv = torch::randn({3, 100, 3 * c});
      const Tensor grad = torch::randn({3, 100, c});
      const std::vector<Tensor> one = RunAttention(qkv, 4, grad, true, gemm);
      at::set_num_threads(2);
      const std::vector<Tensor> two = RunAttention(qkv, 4, grad, true, gemm);
      at::set_num_threads(1);
      for (size_t i = 0; i < one.size(); ++i)
        EXPECT_TRUE(torch::equal(one[i], two[i])) << c << " " << i;
    }
  }
}

TEST_F(AttentionFusedTest, DeclinesWhatItDoesNotTake) {
  const Tensor qkv = torch::randn({2, 16, 24});
  EXPECT_TRUE(AttentionFusable(qkv, 2));
  EXPECT_FALSE(AttentionFusable(qkv.to(torch::kBFloat16), 2));
  EXPECT_FALSE(AttentionFusable(qkv, 5));                        // C = 8 is not a multiple of 5
  EXPECT_FALSE(AttentionFusable(torch::randn({2, 16, 25}), 1));  // not three equal parts
  EXPECT_FALSE(AttentionFusable(torch::randn({2, 24, 16}).transpose(1, 2), 2));  // strided
  EXPECT_FALSE(AttentionFusable(torch::randn({1, kFusedAttentionMaxT + 1, 6}), 1));
  EXPECT_FALSE(AttentionFusable(torch::randn({16, 24}), 2));  // no batch dimension
  EXPECT_THROW(CausalAttentionFused(qkv, 5), c10::Error);
}

GptConfig TinyGpt(Method method, bool fused_attention) {
  GptConfig config = twins::TinyGpt(method, /*n_layer=*/2, /*block_size=*/40);
  config.fused_attention = fused_attention;
  return config;
}

TEST_F(AttentionFusedTest, GptWithFusedAttentionMatchesTheUnfusedGpt) {
  for (Method method : {Method::kPreLn, Method::kGeoNorm}) {
    for (torch::ScalarType type : {torch::kFloat, torch::kDouble}) {
      const std::vector<Tensor> fused = twins::GptGradients(TinyGpt(method, true), type);
      const std::vector<Tensor> twin = twins::GptGradients(TinyGpt(method, false), type);
      ASSERT_EQ(fused.size(), twin.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(fused[i].defined() && twin[i].defined()) << i;
        // Scalars (a step size's gradient) sum over every row with cancellation: 1e-4 in fp32.
        const double tolerance =
            type == torch::kFloat && fused[i].numel() == 1 ? 1e-4 : Tolerance(type);
        EXPECT_LT(RelDiff(fused[i], twin[i]), tolerance)
            << MethodId(method) << " " << torch::toString(type) << " tensor " << i;
      }
    }
  }
}

// Evaluation and sampling run no backward: there the GPT runs SDPA (its flash forward was the
// faster one), so a forward without gradients is the same with fused_attention on and off, bit
// for bit, while with gradients the two differ in the last bits.
TEST_F(AttentionFusedTest, AForwardWithoutGradientsRunsSdpa) {
  Tensor logits[2], trained[2];
  for (int fused = 0; fused < 2; ++fused) {
    torch::manual_seed(5);
    Gpt model(TinyGpt(Method::kPreLn, fused == 1));
    torch::manual_seed(6);
    const Tensor idx = torch::randint(19, {3, 40}, torch::kLong);
    {
      torch::NoGradGuard no_grad;
      logits[fused] = model->forward(idx);
    }
    trained[fused] = model->forward(idx).detach();
  }
  EXPECT_TRUE(torch::equal(logits[0], logits[1]));
  EXPECT_FALSE(torch::equal(trained[0], trained[1]));
  EXPECT_LT(RelDiff(trained[1], trained[0]), 1e-5);
}

}  // namespace
}  // namespace spheret::nn
