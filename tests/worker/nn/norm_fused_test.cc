// The update fused with the next LayerNorm (worker/nn/norm_fused.h) against its unfused twin: the
// update (h + F, or the sphere update) and then torch::layer_norm, values and gradients; and a GPT
// with fused_norm against the same GPT without.
#include "worker/nn/norm_fused.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "tests/worker/nn/gpt_twins.h"
#include "worker/nn/gpt.h"
#include "worker/nn/sphere_fused.h"

namespace spheret::nn {
namespace {

using torch::Tensor;

// fp32 tolerance of a comparison: 1e-5 relative, but 1e-4 for a scalar (the step size's or a
// norm radius' gradient, a sum over every row with cancellation, where the two forms' summation
// orders differ most). fp64 must agree to 1e-12: the same math.
double Tolerance(torch::ScalarType type, const Tensor& value) {
  if (type == torch::kDouble) return 1e-12;
  return value.numel() == 1 ? 1e-4 : 1e-5;
}

using twins::RelDiff;

// The update of a case: the residual add (no rule) or a sphere update.
struct Update {
  std::string name;
  bool sphere;
  SphereRule rule;
};

std::vector<Update> Updates() {
  const double cap = 0.78539816339744830962;
  return {{"add", false, {}},
          {"geonorm", true, {Method::kGeoNorm, 1.0, cap}},
          {"proj_spheret", true, {Method::kProjSpheret, 1.0, cap}},
          {"cay_spheret", true, {Method::kCaySpheret, 1.0, cap}},
          {"p_spheret(p=3)", true, {Method::kPSpheret, 3.0, cap}}};
}

// One comparison: leaves h, f, alpha and a LayerNorm's parameters, random upstream gradients.
struct Case {
  Tensor h, f, alpha, g_out, g_norm;
  LayerNorm norm{nullptr};
};

Case MakeCase(torch::ScalarType type, bool bias, int64_t rows, int64_t c) {
  const auto options = torch::TensorOptions().dtype(type);
  Case x;
  x.h = (torch::randn({rows / 2, 2, c}, options) * 3.0).requires_grad_();
  x.f = torch::randn({rows / 2, 2, c}, options).requires_grad_();
  x.alpha = torch::full({}, 0.7, options).requires_grad_();
  x.norm = LayerNorm(c, bias);
  x.norm->to(type);
  {
    torch::NoGradGuard no_grad;  // parameters away from their init
    x.norm->weight.uniform_(0.5, 1.5);
    if (bias) x.norm->bias.uniform_(-0.5, 0.5);
  }
  x.g_out = torch::randn_like(x.h);
  x.g_norm = torch::randn_like(x.h);
  return x;
}

// out, normed and the gradients of h, f, alpha (sphere), w and b (bias) under g_out (when
// `own_grad`) and g_norm.
std::vector<Tensor> RunUpdate(const Case& x, const Update& update, bool fused, bool own_grad) {
  UpdateAndNorm result;
  if (fused) {
    result = update.sphere ? SphereUpdateLayerNormFused(x.h, x.f, x.alpha, update.rule, *x.norm)
                           : AddLayerNormFused(x.h, x.f, *x.norm);
  } else {
    result.out = update.sphere ? SphereUpdateFused(x.h, x.f, x.alpha, update.rule) : x.h + x.f;
    result.normed = torch::layer_norm(result.out, {x.norm->weight.size(0)}, x.norm->weight,
                                      x.norm->bias, x.norm->eps);
  }
  Tensor loss = (result.normed * x.g_norm).sum();
  if (own_grad) loss = loss + (result.out * x.g_out).sum();
  std::vector<Tensor> wrt = {x.h, x.f, x.norm->weight};
  if (update.sphere) wrt.push_back(x.alpha);
  if (x.norm->bias.defined()) wrt.push_back(x.norm->bias);
  std::vector<Tensor> all = {result.out.detach(), result.normed.detach()};
  for (const Tensor& g : torch::autograd::grad({loss}, wrt)) all.push_back(g);
  return all;
}

class NormFusedTest : public twins::OneThreadTest {};

TEST_F(NormFusedTest, ValuesAndGradientsMatchTheUnfusedTwin) {
  for (const Update& update : Updates()) {
    for (torch::ScalarType type : {torch::kFloat, torch::kDouble}) {
      for (bool bias : {true, false}) {
        for (bool own_grad : {true, false}) {
          const Case x = MakeCase(type, bias, /*rows=*/74, /*c=*/24);  // 3 blocks, the last short
          const std::vector<Tensor> fused = RunUpdate(x, update, true, own_grad);
          const std::vector<Tensor> twin = RunUpdate(x, update, false, own_grad);
          ASSERT_EQ(fused.size(), twin.size());
          const char* names[] = {"out", "normed", "dh", "df", "dw", "dalpha or db", "db"};
          for (size_t i = 0; i < fused.size(); ++i) {
            EXPECT_LT(RelDiff(fused[i], twin[i]), Tolerance(type, twin[i]))
                << update.name << " " << torch::toString(type) << " bias " << bias << " own_grad "
                << own_grad << ": " << names[i];
          }
        }
      }
    }
  }
}

TEST_F(NormFusedTest, RepeatsBitForBitAtAnyThreadCount) {
  for (const Update& update : Updates()) {
    const Case x = MakeCase(torch::kFloat, true, /*rows=*/200, /*c=*/40);
    const std::vector<Tensor> one = RunUpdate(x, update, true, true);
    at::set_num_threads(2);
    const std::vector<Tensor> two = RunUpdate(x, update, true, true);
    at::set_num_threads(1);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
  }
}

TEST_F(NormFusedTest, UnsupportedInputsRunTheUnfusedOps) {
  const Case x = MakeCase(torch::kFloat, true, 8, 16);
  const Tensor h16 = x.h.detach().to(torch::kBFloat16), f16 = x.f.detach().to(torch::kBFloat16);
  EXPECT_FALSE(NormFusable(h16, f16, *x.norm));
  EXPECT_FALSE(NormFusable(x.h, x.f.to(torch::kDouble), *x.norm));
  EXPECT_TRUE(NormFusable(x.h, x.f, *x.norm));
  const UpdateAndNorm mixed = AddLayerNormFused(h16, f16, *x.norm);  // layer_norm's own promotion
  const Tensor sum = h16 + f16;
  EXPECT_TRUE(torch::equal(mixed.out, sum));
  EXPECT_TRUE(torch::equal(
      mixed.normed, torch::layer_norm(sum, {16}, x.norm->weight, x.norm->bias, x.norm->eps)));
}

TEST_F(NormFusedTest, ScaleNormFusedMatchesScaleNormFunction) {
  for (torch::ScalarType type : {torch::kFloat, torch::kDouble}) {
    const auto options = torch::TensorOptions().dtype(type);
    const Tensor x = (torch::randn({5, 19, 24}, options) * 2.0).requires_grad_();
    const Tensor radius = torch::full({}, 3.5, options).requires_grad_();
    const Tensor grad = torch::randn({5, 19, 24}, options);
    std::vector<Tensor> results[2];
    for (int fused = 0; fused < 2; ++fused) {
      const Tensor y = fused ? ScaleNormFused(x, radius) : ScaleNormFunction(x, radius);
      const auto grads = torch::autograd::grad({(y * grad).sum()}, {x, radius});
      results[fused] = {y.detach(), grads[0], grads[1]};
    }
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_LT(RelDiff(results[1][i], results[0][i]), Tolerance(type, results[0][i]))
          << torch::toString(type) << " " << i;
    }
  }
}

GptConfig TinyGpt(Method method, bool fused_norm) {
  GptConfig config = twins::TinyGpt(method, /*n_layer=*/3, /*block_size=*/16);
  config.fused_norm = fused_norm;
  return config;
}

TEST_F(NormFusedTest, GptWithFusedNormMatchesTheUnfusedGpt) {
  for (Method method : {Method::kPreLn, Method::kGeoNorm, Method::kPSpheret, Method::kPreDyt}) {
    for (torch::ScalarType type : {torch::kFloat, torch::kDouble}) {
      const std::vector<Tensor> fused = twins::GptGradients(TinyGpt(method, true), type);
      const std::vector<Tensor> twin = twins::GptGradients(TinyGpt(method, false), type);
      ASSERT_EQ(fused.size(), twin.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(fused[i].defined() && twin[i].defined()) << i;
        EXPECT_LT(RelDiff(fused[i], twin[i]), Tolerance(type, twin[i]))
            << MethodId(method) << " " << torch::toString(type) << " tensor " << i;
      }
    }
  }
}

}  // namespace
}  // namespace spheret::nn
