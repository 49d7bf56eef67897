// The trainer's Jacobian measurements (worker/nn/model_stability.h: MeasureJacobians, on the
// Golub-Kahan ranges of worker/nn/jacobian.h) against the singular values of dense Jacobians
// built here row by row (torch::linalg_svdvals in fp64): every update J_l and the end-to-end G,
// for plain, sphere, AutoNorm and nGPT models (whose G is singular: its outputs are unit), for
// looped models through each inter_loop_norm, for fp32 models (measured in fp64, left as they
// were), and maps of known singular values down to 1e-10.
#include "worker/nn/jacobian.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/worker/nn/dense_jacobian.h"
#include "tests/worker/nn/trained_tiny.h"
#include "worker/nn/gpt.h"
#include "worker/nn/model_stability.h"

namespace spheret::nn {
namespace {

using testing::DenseJacobian;
using testing::Map;

// Singular values, descending.
torch::Tensor SingularValues(const torch::Tensor& m) { return torch::linalg_svdvals(m); }

struct Tiny {
  Gpt model{nullptr};
  torch::Tensor idx;
};

Tiny MakeTiny(Method method, double weight_scale, int64_t loops = 1,
              InterLoopNorm inter_loop = InterLoopNorm::kNone,
              torch::ScalarType dtype = torch::kDouble) {
  torch::manual_seed(11);
  GptConfig config;
  config.vocab_size = 13;
  config.block_size = 4;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 6;
  config.loops = loops;
  config.inter_loop_norm = inter_loop;
  config.connection.method = method;
  config.bias = method != Method::kNgpt;  // nGPT has no biases
  EXPECT_TRUE(ValidateGptConfig(&config).ok());
  Tiny tiny{Gpt(config), torch::tensor({{3, 1, 7, 12}}, torch::kLong)};
  tiny.model->to(dtype);
  tiny.model->eval();
  torch::NoGradGuard no_grad;  // F larger than at init, so J is far from the identity
  for (int64_t b = 0; b < 2; ++b) {
    tiny.model->block_at(b).attn->c_proj->weight.mul_(weight_scale);
    tiny.model->block_at(b).mlp->c_proj->weight.mul_(weight_scale);
    tiny.model->block_at(b).attn->c_attn->weight.mul_(weight_scale);
  }
  if (!tiny.model->loop_norm.is_empty()) {  // a learned norm away from its init
    for (torch::Tensor& p : tiny.model->loop_norm.ptr()->parameters()) p.uniform_(0.5, 1.5);
  }
  return tiny;
}

// The dense SVD's own error, about n eps sigma_max (LAPACK's bound, with room).
double DenseError(double top, int64_t n) { return 4.0 * static_cast<double>(n) * 2.3e-16 * top; }

// A range from as many steps as dimensions against the dense values: sigma_max and sigma_min
// within the stated tolerance (plus the dense SVD's own error), the interval around the dense
// sigma_min, and sigma_min to 1e-3 of itself wherever it stands above that error (down to
// 1e-10 here).
void ExpectCertified(const SingularRange& range, double top, double bottom, int64_t n,
                     const std::string& what) {
  const double slack = range.tolerance + DenseError(top, n);
  EXPECT_TRUE(range.complete) << what;
  EXPECT_NEAR(range.sigma_max, top, slack) << what;
  EXPECT_LE(range.sigma_min_lower, bottom + DenseError(top, n)) << what;
  EXPECT_GE(range.sigma_min_upper, bottom - DenseError(top, n)) << what;
  EXPECT_LE(range.sigma_min_upper - range.sigma_min_lower, 2 * slack) << what;
  if (bottom > 1e3 * slack) {
    EXPECT_NEAR(range.sigma_min_upper, bottom, 1e-3 * bottom) << what;
  }
}

// A range from fewer steps: sigma_max from below, sigma_min from above, nothing certified.
void ExpectOneSided(const SingularRange& range, double top, double bottom, int64_t n,
                    const std::string& what) {
  EXPECT_FALSE(range.complete) << what;
  EXPECT_LE(range.sigma_max, top + DenseError(top, n)) << what;
  EXPECT_GT(range.sigma_max, 0.5 * top) << what;
  EXPECT_GE(range.sigma_min_upper, bottom - DenseError(top, n)) << what;
  EXPECT_EQ(range.sigma_min_lower, 0.0) << what;
}

// Each update's map, built from the blocks here (attention then MLP, loop after loop), and
// whether an inter-loop norm comes before it.
std::vector<Map> UpdateMaps(GptImpl& model, std::vector<bool>* loop_start) {
  std::vector<Map> updates;
  for (int64_t loop = 0; loop < model.config().loops; ++loop) {
    for (int64_t b = 0; b < model.config().n_layer; ++b) {
      BlockImpl& block = model.block_at(b);
      updates.push_back([&block](const torch::Tensor& h) {
        return block.conn_attn->forward(h,
                                        [&block](const torch::Tensor& x) { return block.attn(x); });
      });
      updates.push_back([&block](const torch::Tensor& h) {
        return block.conn_mlp->forward(h,
                                       [&block](const torch::Tensor& x) { return block.mlp(x); });
      });
      loop_start->push_back(loop > 0 && b == 0);
      loop_start->push_back(false);
    }
  }
  return updates;
}

// G through the blocks' own forward and the inter-loop norm (which reads the input too).
Map Stack(GptImpl& model) {
  return [&model](const torch::Tensor& x) {
    torch::Tensor y = x;
    for (int64_t loop = 0; loop < model.config().loops; ++loop) {
      if (loop > 0) y = model.InterLoop(y, x);
      for (int64_t b = 0; b < model.config().n_layer; ++b)
        y = model.block_at(b).forward(y, nullptr);
    }
    return y;
  };
}

void ExpectMeasuredMatchesDense(Tiny tiny, const std::string& name) {
  SCOPED_TRACE(name);
  GptImpl& model = *tiny.model;
  ForwardRecord record;
  {
    torch::NoGradGuard no_grad;
    model.hidden(tiny.idx, &record);
  }
  const torch::Tensor h0 = record.embedded;
  const int64_t n = h0.numel();
  const ModelJacobians measured = MeasureJacobians(model, tiny.idx, /*iterations=*/n, 5);
  const CompositeModeGuard composite;
  std::vector<bool> loop_start;
  const std::vector<Map> updates = UpdateMaps(model, &loop_start);
  ASSERT_EQ(measured.updates.size(), updates.size());
  torch::Tensor h = h0;
  for (size_t l = 0; l < updates.size(); ++l) {
    if (loop_start[l]) {
      torch::NoGradGuard no_grad;
      h = model.InterLoop(h, h0);
    }
    const torch::Tensor sigma = SingularValues(DenseJacobian(updates[l], h));
    const double top = sigma[0].item<double>(), bottom = sigma[n - 1].item<double>();
    ExpectCertified(measured.updates[l].sigma, top, bottom, n, "J_" + std::to_string(l + 1));
    EXPECT_EQ(measured.updates[l].bound_max.has_value(),
              IsSphereMethod(model.config().connection.method));
    torch::NoGradGuard no_grad;
    h = updates[l](h);
  }
  const Map stack = Stack(model);
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(stack(h0), record.loop_states.back(), 1e-9, 1e-12))
        << "the stack here is the model's";
  }
  const torch::Tensor sigma = SingularValues(DenseJacobian(stack, h0));
  const double top = sigma[0].item<double>(), bottom = sigma[n - 1].item<double>();
  ExpectCertified(measured.e2e, top, bottom, n, "G");
  // With fewer steps than dimensions (as in training) the extremes are approached from inside.
  const ModelJacobians rough = MeasureJacobians(model, tiny.idx, n / 3, 5);
  ExpectOneSided(rough.e2e, top, bottom, n, "G in n / 3 steps");
  std::printf(
      "%-28s G dense %.6g .. %.6g; measured %.6g, sigma_min in [%.6g, %.6g]; in %lld steps "
      "%.6g, sigma_min <= %.6g\n",
      name.c_str(), top, bottom, measured.e2e.sigma_max, measured.e2e.sigma_min_lower,
      measured.e2e.sigma_min_upper, static_cast<long long>(n / 3), rough.e2e.sigma_max,
      rough.e2e.sigma_min_upper);
}

// A = Q1 diag(s) Q2^T on (1, T, C) tensors, s from 1 down to `smallest` (log-spaced).
struct KnownMap {
  torch::Tensor a;  // (n, n)
  Operator apply, apply_t;
};
KnownMap MakeKnownMap(int64_t t, int64_t c, double smallest, uint64_t seed) {
  const int64_t n = t * c;
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  auto orthogonal = [&] {
    return std::get<0>(torch::linalg_qr(torch::randn({n, n}, generator, torch::kDouble)));
  };
  const torch::Tensor s = torch::logspace(0, std::log10(smallest), n, 10, torch::kDouble);
  const torch::Tensor left = orthogonal(), right = orthogonal();
  KnownMap map{torch::matmul(left * s, right.t()), nullptr, nullptr};
  const torch::Tensor a = map.a;
  map.apply = [a, t, c](const torch::Tensor& v) {
    return torch::mv(a, v.reshape({-1})).reshape({1, t, c});
  };
  map.apply_t = [a, t, c](const torch::Tensor& u) {
    return torch::mv(a.t(), u.reshape({-1})).reshape({1, t, c});
  };
  return map;
}

// Near-singular maps (sigma_min 1e-10, 1e-12: below what Lanczos on A^T A can resolve in fp64,
// ~1e-8, and what fp32 can, ~3e-4), a singular one and well-conditioned ones: complete runs
// certify an interval around the dense value; partial ones bound sigma_min from above only.
TEST(SingularRange, CertifiesNearSingularAndWellConditionedMapsAgainstDenseSvd) {
  torch::set_num_threads(1);
  for (const auto& [t, c, smallest] : std::vector<std::tuple<int64_t, int64_t, double>>{
           {4, 6, 1e-10}, {4, 12, 1e-12}, {4, 12, 0.5}, {2, 6, 0.9}, {4, 6, 0.0}}) {
    char what_text[64];
    std::snprintf(what_text, sizeof(what_text), "%lld dims, sigma_min %g",
                  static_cast<long long>(t * c), smallest);
    const std::string what = what_text;
    const int64_t n = t * c;
    const KnownMap map = MakeKnownMap(t, c, smallest == 0 ? 1e-300 : smallest, n);
    const torch::Tensor dense = SingularValues(map.a);
    const double top = dense[0].item<double>(), bottom = dense[n - 1].item<double>();
    const torch::Tensor start = torch::ones({1, t, c}, torch::kDouble);
    const SingularRange full = MeasureSingularRange(map.apply, map.apply_t, start, n + 5,
                                                    at::detail::createCPUGenerator(1));
    ExpectCertified(full, top, bottom, n, what);
    EXPECT_EQ(full.steps, n) << "capped at the dimension";
    const SingularRange part = MeasureSingularRange(map.apply, map.apply_t, start, n / 3,
                                                    at::detail::createCPUGenerator(1));
    ExpectOneSided(part, top, bottom, n, what + " in n / 3 steps");
    std::printf(
        "%-28s dense %.6g .. %.6g; measured %.6g, sigma_min in [%.6g, %.6g] (tolerance "
        "%.2g, |upper - dense| %.2g); in %lld steps sigma_min <= %.6g\n",
        what.c_str(), top, bottom, full.sigma_max, full.sigma_min_lower, full.sigma_min_upper,
        full.tolerance, std::abs(full.sigma_min_upper - bottom), static_cast<long long>(n / 3),
        part.sigma_min_upper);
  }
}

TEST(Jacobian, MeasuredUpdateAndEndToEndJacobiansMatchDense) {
  for (double scale : {1.0, 8.0}) {
    for (Method method : {Method::kPreLn, Method::kProjSpheret, Method::kPSpheret,
                          Method::kAutoNorm, Method::kNgpt}) {
      ExpectMeasuredMatchesDense(MakeTiny(method, scale),
                                 std::string(MethodId(method)) + " x" + std::to_string(scale));
    }
  }
}

// An fp32 model (as training holds it) is measured in fp64 and left as it was: the same tensors
// with their dtypes and values, its training mode, and LibTorch's global generator undrawn.
TEST(Jacobian, Fp32ModelsAreMeasuredInFp64AndLeftAsTheyWere) {
  torch::set_num_threads(1);
  Tiny tiny = MakeTiny(Method::kGeoNorm, 4.0, 1, InterLoopNorm::kNone, torch::kFloat);
  GptImpl& model = *tiny.model;
  model.train();
  std::vector<torch::Tensor> tensors = model.parameters(), copies;
  for (const torch::Tensor& b : model.buffers()) tensors.push_back(b);
  for (const torch::Tensor& t : tensors) copies.push_back(t.detach().clone());
  torch::manual_seed(3);
  const ModelJacobians single = MeasureJacobians(model, tiny.idx, 24, 5);
  const torch::Tensor drawn = torch::rand({4});
  torch::manual_seed(3);
  EXPECT_TRUE(torch::equal(drawn, torch::rand({4}))) << "the global generator was drawn from";
  EXPECT_TRUE(model.is_training());
  std::vector<torch::Tensor> after = model.parameters();
  for (const torch::Tensor& b : model.buffers()) after.push_back(b);
  ASSERT_EQ(after.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(after[i].unsafeGetTensorImpl(), tensors[i].unsafeGetTensorImpl());
    EXPECT_EQ(after[i].scalar_type(), copies[i].scalar_type());
    EXPECT_TRUE(torch::equal(after[i], copies[i])) << "tensor " << i;
  }
  // The same weights held in fp64 give the same values: the measurement ran in fp64.
  model.to(torch::kDouble);
  const ModelJacobians twin = MeasureJacobians(model, tiny.idx, 24, 5);
  EXPECT_NEAR(single.e2e.sigma_min_upper, twin.e2e.sigma_min_upper, 1e-12 * twin.e2e.sigma_max);
  EXPECT_NEAR(single.e2e.sigma_max, twin.e2e.sigma_max, 1e-12 * twin.e2e.sigma_max);
  EXPECT_TRUE(single.e2e.complete);
}

// A briefly trained model (trained_tiny.h: MakeTiny's shape) as ExpectMeasuredMatchesDense reads
// it.
void ExpectTrainedMatchesDense(Method method, double p, int64_t seed, int steps) {
  ConnectionOptions connection;
  connection.method = method;
  connection.p = p;
  const testing::TrainedTiny& trained = testing::BrieflyTrained(connection, seed, steps);
  ExpectMeasuredMatchesDense(Tiny{trained.model, trained.idx},
                             std::string("trained ") + std::string(MethodId(method)) + " p=" +
                                 std::to_string(p).substr(0, 3) + " seed " + std::to_string(seed));
}

// nGPT, GeoNorm, p = 0.5 and 2, Pre-LN.
const std::vector<std::pair<Method, double>>& TrainedMethods() {
  static const auto* methods = new std::vector<std::pair<Method, double>>{{Method::kNgpt, 1.0},
                                                                          {Method::kGeoNorm, 1.0},
                                                                          {Method::kPSpheret, 0.5},
                                                                          {Method::kPSpheret, 2.0},
                                                                          {Method::kPreLn, 1.0}};
  return *methods;
}

// Briefly trained models: nGPT's G is singular (its outputs are unit: sigma_min(G) is rounding,
// far below 1e-8), the sphere and Pre-LN ones are not. One model per method, trained
// kBriefSteps steps (the sphere ones shared with stability_trained_test.cc): the singular G
// (nGPT), the regular ones of a capped sphere rule at p = inf, 0.5 and 2 and of a Euclidean
// baseline, on trained weights. The exhaustive twin trains two seeds for 30 steps each.
TEST(Jacobian, BrieflyTrainedModelsMatchDense) {
  torch::set_num_threads(1);
  for (const auto& [method, p] : TrainedMethods()) {
    ExpectTrainedMatchesDense(method, p, 1, testing::kBriefSteps);
  }
}

TEST(Jacobian, BrieflyTrainedModelsMatchDenseExhaustive) {
  torch::set_num_threads(1);
  for (const auto& [method, p] : TrainedMethods()) {
    for (int64_t seed : {1, 2}) ExpectTrainedMatchesDense(method, p, seed, 30);
  }
}

TEST(Jacobian, LoopedModelsIncludeTheInterLoopNorm) {
  for (InterLoopNorm norm : {InterLoopNorm::kNone, InterLoopNorm::kLayerNorm,
                             InterLoopNorm::kRmsNorm, InterLoopNorm::kSphere}) {
    ExpectMeasuredMatchesDense(MakeTiny(Method::kPreLn, 4.0, 2, norm),
                               "pre_ln loops 2 " + std::string(KnobId(norm)));
  }
}

}  // namespace
}  // namespace spheret::nn
