#include "worker/nn/norms.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tests/worker/nn/gradcheck.h"

namespace spheret::nn {
namespace {

TEST(ScaleNormTest, RadiusIsSqrtCAtInitForEveryWidth) {
  for (int64_t c : {16, 64, 128, 192, 399, 400, 401, 512, 768, 1024, 1280}) {
    ScaleNorm norm(ScaleNormOptions{c, RadiusParam::kClamp});
    EXPECT_FLOAT_EQ(norm->radius().item<float>(), static_cast<float>(std::sqrt(double(c))))
        << "C = " << c;
    const torch::Tensor x = torch::randn({2, 3, c});
    const torch::Tensor out = norm->forward(x);
    EXPECT_TRUE(
        torch::allclose(out.norm(2, -1), torch::full({2, 3}, std::sqrt(double(c))), 1e-5, 1e-5))
        << "C = " << c;
  }
}

TEST(ScaleNormTest, GradientFlowsAtInit) {
  for (int64_t c : {64, 512, 768}) {  // Below and above the softplus threshold of 20 = sqrt(400).
    ScaleNorm norm(ScaleNormOptions{c, RadiusParam::kClamp});
    const torch::Tensor x = torch::randn({4, c});
    (norm->forward(x) * torch::randn({4, c})).sum().backward();
    ASSERT_TRUE(norm->gamma.grad().defined());
    EXPECT_NE(norm->gamma.grad().item<float>(), 0.0f) << "C = " << c;
  }
}

TEST(ScaleNormTest, RadiusIsClampedToOneAndSqrtC) {
  const int64_t c = 64;
  ScaleNorm norm(ScaleNormOptions{c, RadiusParam::kClamp});
  torch::NoGradGuard no_grad;
  norm->gamma.fill_(50.0);  // softplus = 50 > 8 = sqrt(C)
  EXPECT_FLOAT_EQ(norm->radius().item<float>(), 8.0f);
  norm->gamma.fill_(-5.0);  // softplus ~ 0.0067 < 1
  EXPECT_FLOAT_EQ(norm->radius().item<float>(), 1.0f);
  norm->gamma.fill_(2.0);  // softplus(2) = 2.1269 inside [1, 8]
  EXPECT_NEAR(norm->radius().item<float>(), std::log1p(std::exp(2.0)), 1e-6);
}

TEST(ScaleNormTest, FreeRadiusIsUnclamped) {
  ScaleNorm norm(ScaleNormOptions{64, RadiusParam::kFree});
  EXPECT_FLOAT_EQ(norm->radius().item<float>(), 8.0f);
  torch::NoGradGuard no_grad;
  norm->gamma.fill_(50.0);
  EXPECT_FLOAT_EQ(norm->radius().item<float>(), 50.0f);
}

TEST(ScaleNormTest, GradcheckOffTheClampBounds) {
  ScaleNorm norm(ScaleNormOptions{6, RadiusParam::kClamp});
  norm->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    norm->gamma.fill_(1.3);  // r = softplus(1.3) = 1.54, inside (1, sqrt(6)).
  }
  const torch::Tensor x = torch::randn({2, 3, 6}, torch::kDouble).requires_grad_();
  EXPECT_TRUE(testing::GradCheck([&] { return norm->forward(x); }, {x, norm->gamma}));
}

TEST(SoftplusTest, HasPyTorchThresholdSemantics) {
  EXPECT_FLOAT_EQ(Softplus(torch::full({}, 30.0f)).item<float>(), 30.0f);
  EXPECT_NEAR(Softplus(torch::full({}, 0.0, torch::kDouble)).item<double>(), std::log(2.0), 1e-15);
}

TEST(DytTest, MatchesDefinitionAndInit) {
  Dyt dyt(DytOptions{4, true, 0.5});
  EXPECT_FLOAT_EQ(dyt->a.item<float>(), 0.5f);
  EXPECT_TRUE(torch::equal(dyt->g, torch::ones({4})));
  EXPECT_TRUE(torch::equal(dyt->b, torch::zeros({4})));
  const torch::Tensor x = torch::randn({3, 4});
  EXPECT_TRUE(torch::allclose(dyt->forward(x), torch::tanh(0.5 * x)));
  Dyt no_bias(DytOptions{4, false, 0.5});
  EXPECT_FALSE(no_bias->b.defined());
  EXPECT_EQ(no_bias->parameters().size(), 2u);
}

TEST(RmsNormTest, MatchesDefinition) {
  RmsNorm norm(8);
  const torch::Tensor x = torch::randn({5, 8}, torch::kDouble);
  norm->to(torch::kDouble);
  const torch::Tensor expected = x / torch::sqrt(x.square().mean(-1, true) + 1e-5);
  EXPECT_TRUE(torch::allclose(norm->forward(x), expected, 1e-12, 1e-12));
}

}  // namespace
}  // namespace spheret::nn
