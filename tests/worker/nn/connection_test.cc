#include "worker/nn/connection.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "worker/nn/norms.h"
#include "worker/nn/sphere_connection.h"

namespace spheret::nn {
namespace {

constexpr const char* kAllMethods[] = {"pre_ln",  "post_ln",      "pre_dyt",     "peri_ln",  "keel",
                                       "geonorm", "proj_spheret", "cay_spheret", "p_spheret"};

ConnectionOptions Options(Method method, int64_t c = 16, int64_t n_layer = 4) {
  ConnectionOptions options;
  options.method = method;
  options.n_embd = c;
  options.n_layer = n_layer;
  return options;
}

TEST(ConnectionOptionsTest, MethodIdsRoundTrip) {
  for (const char* id : kAllMethods) {
    const std::optional<Method> method = ParseMethod(id);
    ASSERT_TRUE(method.has_value()) << id;
    EXPECT_EQ(MethodId(*method), id);
  }
  EXPECT_FALSE(ParseMethod("sphere").has_value());
  EXPECT_FALSE(ParseMethod("PRE_LN").has_value());
  EXPECT_EQ(ParseKnob<Decay>("harmonic"), Decay::kHarmonic);
  EXPECT_FALSE(ParseKnob<Decay>("cosine").has_value());
  EXPECT_EQ(ParseKnob<NormKind>("rmsnorm"), NormKind::kRmsNorm);
  EXPECT_EQ(ParseKnob<StepParam>("sigmoid"), StepParam::kSigmoid);
  EXPECT_EQ(ParseKnob<RadiusParam>("free"), RadiusParam::kFree);
  EXPECT_EQ(ParseKnob<DecayIndex>("sublayer"), DecayIndex::kSublayer);
  EXPECT_EQ(KnobId(NormKind::kNone), "none");
}

TEST(ConnectionOptionsTest, InvalidOptionsNameTheKnob) {
  ConnectionOptions options = Options(Method::kPSpheret);
  EXPECT_EQ(ValidateConnectionOptions(options), absl::OkStatus());
  for (double p : {0.0, -1.0, double{NAN}, double{INFINITY}}) {
    options.p = p;
    EXPECT_EQ(ValidateConnectionOptions(options).message().rfind("p must be", 0), 0u) << p;
  }
  options.p = 1.0;
  for (double angle : {0.0, -0.1, 1.6, double{NAN}}) {
    options.angle_max = angle;
    EXPECT_NE(ValidateConnectionOptions(options).message().find("angle_max"), std::string::npos)
        << angle;
  }
  options.angle_max = M_PI / 2;  // The upper bound is allowed.
  EXPECT_EQ(ValidateConnectionOptions(options), absl::OkStatus());
  options.n_layer = 0;
  EXPECT_NE(ValidateConnectionOptions(options).message().find("n_layer"), std::string::npos);
}

TEST(ConnectionFactoryTest, BuildsEveryMethodAndRefusesBadOptions) {
  for (const char* id : kAllMethods) {
    Connection connection = MakeConnection(Options(*ParseMethod(id)), {1, 0});
    const torch::Tensor h = torch::randn({2, 3, 16});
    const torch::Tensor out =
        connection->forward(h, [](const torch::Tensor& x) { return x * 0.5; });
    EXPECT_EQ(out.sizes(), h.sizes()) << id;
  }
  ConnectionOptions bad = Options(Method::kPSpheret);
  bad.p = -2;
  try {
    MakeConnection(bad, {1, 0});
    ADD_FAILURE() << "p = -2 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "p must be a finite number > 0, got -2");
  }
  EXPECT_THROW(MakeConnection(Options(Method::kPreLn), {5, 0}), std::invalid_argument);
  EXPECT_THROW(MakeConnection(Options(Method::kPreLn), {1, 2}), std::invalid_argument);
}

TEST(DecayTest, FactorsForEveryScheduleAndIndex) {
  ConnectionOptions options = Options(Method::kGeoNorm, 16, 4);
  options.decay = Decay::kSqrt;
  EXPECT_DOUBLE_EQ(DecayFactor(options, {4, 1}), 0.5);
  options.decay = Decay::kHarmonic;
  EXPECT_DOUBLE_EQ(DecayFactor(options, {4, 0}), 0.25);
  options.decay = Decay::kLinear;  // (n - l) / n with n = L = 4 (Code 1)
  EXPECT_DOUBLE_EQ(DecayFactor(options, {1, 0}), 0.75);
  EXPECT_DOUBLE_EQ(DecayFactor(options, {4, 1}), 0.0);
  options.decay = Decay::kNone;
  EXPECT_DOUBLE_EQ(DecayFactor(options, {3, 1}), 1.0);
  options.decay_index = DecayIndex::kSublayer;  // l = 2(block - 1) + sublayer + 1, n = 2L = 8
  options.decay = Decay::kHarmonic;
  EXPECT_DOUBLE_EQ(DecayFactor(options, {2, 1}), 0.25);
  options.decay = Decay::kLinear;  // (2L - l) / 2L: the last sublayer update is the identity
  EXPECT_DOUBLE_EQ(DecayFactor(options, {4, 1}), 0.0);
  EXPECT_DOUBLE_EQ(DecayFactor(options, {1, 0}), 7.0 / 8);
  EXPECT_DOUBLE_EQ(DecayFactor(options, {4, 0}), 1.0 / 8);
  options.decay = Decay::kSqrt;
  EXPECT_DOUBLE_EQ(DecayFactor(options, {2, 1}), 0.5);
}

// The paper's appendix Code 1: lambda_l = (L - l) / L with the 1-based block index l, so
// lambda_1 = (L - 1)/L and the last block's lambda_L = 0 (its updates are the identity).
TEST(DecayTest, LinearIsCodeOneForOneTwoAndTwelveBlocks) {
  for (const int64_t n_layer : {1, 2, 12}) {
    ConnectionOptions options = Options(Method::kGeoNorm, 16, n_layer);
    options.decay = Decay::kLinear;
    const double big_l = static_cast<double>(n_layer);
    for (int64_t l = 1; l <= n_layer; ++l) {
      for (int sublayer : {0, 1}) {
        EXPECT_DOUBLE_EQ(DecayFactor(options, {l, sublayer}),
                         (big_l - static_cast<double>(l)) / big_l)
            << "L=" << n_layer << " l=" << l;
      }
    }
    EXPECT_DOUBLE_EQ(DecayFactor(options, {1, 0}), (big_l - 1) / big_l);
    EXPECT_DOUBLE_EQ(DecayFactor(options, {n_layer, 1}), 0.0);
    // The last block's updates are the identity, whatever F.
    SpheretConnection last(options, SublayerPosition{n_layer, 1});
    const torch::Tensor h = torch::randn({2, 3, 16});
    EXPECT_TRUE(torch::allclose(last(h, [](const torch::Tensor& x) { return 5 * x.flip(-1); }), h,
                                1e-6, 1e-6));
  }
}

TEST(StepSizeTest, ClampInitGivesLambdaWithGradientThroughTheKink) {
  ConnectionOptions options = Options(Method::kGeoNorm, 16, 4);
  SpheretConnection connection(options, SublayerPosition{4, 0});
  const torch::Tensor alpha = connection->alpha();
  EXPECT_FLOAT_EQ(alpha.item<float>(), 0.5f);  // lambda_4 = 1/sqrt(4), softplus(a) = 1
  alpha.backward();
  // d alpha / d a = lambda * sigmoid(ln(e - 1)) = lambda (1 - 1/e), as autograd at the clamp's
  // kink.
  EXPECT_NEAR(connection->a.grad().item<float>(), 0.5 * (1 - std::exp(-1.0)), 1e-6);
}

TEST(StepSizeTest, SigmoidParamStartsAtNinetyFivePercent) {
  ConnectionOptions options = Options(Method::kCaySpheret, 16, 4);
  options.step_param = StepParam::kSigmoid;
  SpheretConnection connection(options, SublayerPosition{1, 1});
  EXPECT_NEAR(connection->alpha().item<float>(), 0.95, 1e-6);
  {
    torch::NoGradGuard no_grad;
    connection->a.fill_(100.0);
  }
  EXPECT_NEAR(connection->alpha().item<float>(), 1.0, 1e-6);
  // The clamp form saturates at lambda instead.
  EXPECT_FLOAT_EQ(SphereStepSize(torch::full({}, 100.0), 0.3, StepParam::kClamp).item<float>(),
                  0.3f);
}

TEST(SpheretConnectionTest, FeedsInnerNormToFAndReportsDiagnostics) {
  torch::manual_seed(3);
  for (const char* id : {"geonorm", "proj_spheret", "cay_spheret", "p_spheret"}) {
    ConnectionOptions options = Options(*ParseMethod(id), 16, 4);
    options.p = 0.5;
    SpheretConnection connection(options, SublayerPosition{2, 0});
    const torch::Tensor h = torch::randn({2, 5, 16}) * 4.0;
    torch::Tensor seen;
    const Sublayer sublayer = [&](const torch::Tensor& x) {
      seen = x;
      return torch::tanh(x) * 3.0;
    };
    ConnectionDiagnostics diagnostics;
    const torch::Tensor out = connection->forward(h, sublayer, &diagnostics);
    EXPECT_TRUE(torch::allclose(seen, torch::layer_norm(h, {16}), 1e-5, 1e-5)) << id;
    EXPECT_TRUE(torch::allclose(out, connection->update(h, torch::tanh(seen) * 3.0))) << id;
    EXPECT_TRUE(torch::allclose(out.norm(2, -1), h.norm(2, -1), 1e-5, 1e-5)) << id;
    EXPECT_NEAR(diagnostics.hidden_norm, h.norm(2, -1).mean().item<double>(), 1e-4) << id;
    ASSERT_TRUE(diagnostics.alpha.has_value());
    EXPECT_NEAR(*diagnostics.alpha, 1 / std::sqrt(2.0), 1e-6) << id;
    EXPECT_GT(diagnostics.theta, 0.0) << id;
    EXPECT_LT(diagnostics.theta, M_PI / 2) << id;
    EXPECT_GT(diagnostics.radial, 0.0) << id;
    EXPECT_LT(diagnostics.radial, 1.0) << id;
  }
}

TEST(SpheretConnectionTest, InnerNormKnob) {
  ConnectionOptions options = Options(Method::kGeoNorm, 16, 4);
  options.inner_norm = NormKind::kNone;
  SpheretConnection connection(options, SublayerPosition{1, 0});
  const torch::Tensor h = torch::randn({2, 16});
  torch::Tensor seen;
  connection->forward(h, [&](const torch::Tensor& x) { return seen = x; });
  EXPECT_TRUE(torch::equal(seen, h));
  EXPECT_TRUE(connection->parameters().size() == 1u);  // a only
  options.inner_norm = NormKind::kRmsNorm;
  SpheretConnection rms(options, SublayerPosition{1, 0});
  rms->forward(h, [&](const torch::Tensor& x) { return seen = x; });
  EXPECT_TRUE(torch::allclose(seen, h / torch::sqrt(h.square().mean(-1, true) + 1e-5)));
}

TEST(EuclideanDiagnosticsTest, HaveNoAlphaAndMeasureTheRotation) {
  Connection connection = MakeConnection(Options(Method::kPreLn), {1, 0});
  const torch::Tensor h = torch::randn({3, 16});
  ConnectionDiagnostics diagnostics;
  diagnostics.alpha = 1.0;
  connection->forward(
      h, [](const torch::Tensor& x) { return torch::zeros_like(x); }, &diagnostics);
  EXPECT_FALSE(diagnostics.alpha.has_value());
  EXPECT_NEAR(diagnostics.theta, 0.0, 1e-3);  // F = 0: no rotation.
  EXPECT_NEAR(diagnostics.hidden_norm, h.norm(2, -1).mean().item<double>(), 1e-4);
}

TEST(ModelNormsTest, EmbeddingAndFinalNormsFollowTheMethod) {
  const torch::Tensor x = torch::randn({2, 3, 16});
  // §4.2: ScaleNorm "for all three types of SpheretNorm" by default, none for GeoNorm (Eq. 3).
  for (Method method : {Method::kProjSpheret, Method::kCaySpheret, Method::kPSpheret}) {
    torch::nn::AnyModule scalenorm = MakeEmbeddingNorm(Options(method));
    EXPECT_TRUE(torch::allclose(scalenorm.forward(x).norm(2, -1), torch::full({2, 3}, 4.0f)));
    ConnectionOptions no_scalenorm = Options(method);
    no_scalenorm.scalenorm = false;
    EXPECT_TRUE(torch::equal(MakeEmbeddingNorm(no_scalenorm).forward(x), x));
  }
  EXPECT_TRUE(torch::equal(MakeEmbeddingNorm(Options(Method::kGeoNorm)).forward(x), x));
  ConnectionOptions geonorm_scalenorm = Options(Method::kGeoNorm);
  geonorm_scalenorm.scalenorm = true;
  EXPECT_TRUE(torch::allclose(MakeEmbeddingNorm(geonorm_scalenorm).forward(x).norm(2, -1),
                              torch::full({2, 3}, 4.0f)));
  EXPECT_TRUE(torch::equal(MakeEmbeddingNorm(Options(Method::kPreLn)).forward(x), x));

  EXPECT_TRUE(torch::allclose(MakeFinalNorm(Options(Method::kPreLn)).forward(x),
                              torch::layer_norm(x, {16}), 1e-5, 1e-5));
  EXPECT_TRUE(
      torch::allclose(MakeFinalNorm(Options(Method::kPreDyt)).forward(x), torch::tanh(0.5 * x)));
  ConnectionOptions none = Options(Method::kPeriLn);
  none.final_norm = NormKind::kNone;
  EXPECT_TRUE(torch::equal(MakeFinalNorm(none).forward(x), x));
}

}  // namespace
}  // namespace spheret::nn
