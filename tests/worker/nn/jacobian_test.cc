// The trainer's Jacobian measurements (worker/nn/model_stability.h: MeasureJacobians, on the
// Lanczos estimates of worker/nn/jacobian.h) against the singular values of dense Jacobians built
// here row by row: every update J_l and the end-to-end G, for plain, sphere, AutoNorm and nGPT
// models and for looped models through each inter_loop_norm.
#include "worker/nn/jacobian.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "tests/worker/nn/dense_jacobian.h"
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
              InterLoopNorm inter_loop = InterLoopNorm::kNone) {
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
  tiny.model->to(torch::kDouble);
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

// To 1e-3 of the value, or of sigma_max where the value is rounding (a rank-deficient J:
// nGPT's output is unit, so its radial output directions are lost).
void ExpectMatch(double estimate, double dense, double top, const std::string& what) {
  const double tolerance = 1e-3 * (dense > 1e-6 * top ? dense : top);
  EXPECT_NEAR(estimate, dense, tolerance) << what;
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
    ExpectMatch(measured.updates[l].sigma_max, top, top, "sigma_max of J_" + std::to_string(l + 1));
    ExpectMatch(measured.updates[l].sigma_min, bottom, top,
                "sigma_min of J_" + std::to_string(l + 1));
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
  ExpectMatch(measured.e2e_sigma_max, top, top, "sigma_max of G");
  ExpectMatch(measured.e2e_sigma_min, bottom, top, "sigma_min of G");
  // With fewer steps than dimensions (as in training) the extremes are approached from inside.
  const ModelJacobians rough = MeasureJacobians(model, tiny.idx, n / 3, 5);
  EXPECT_LE(rough.e2e_sigma_max, top * (1 + 1e-9));
  EXPECT_GE(rough.e2e_sigma_min, bottom * (1 - 1e-9) - 1e-9 * top);
  EXPECT_GT(rough.e2e_sigma_max, 0.5 * top);
  std::printf("%-28s G dense %.6g .. %.6g, measured %.6g .. %.6g (%zu updates)\n", name.c_str(),
              top, bottom, measured.e2e_sigma_max, measured.e2e_sigma_min, updates.size());
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

TEST(Jacobian, LoopedModelsIncludeTheInterLoopNorm) {
  for (InterLoopNorm norm : {InterLoopNorm::kNone, InterLoopNorm::kLayerNorm,
                             InterLoopNorm::kRmsNorm, InterLoopNorm::kSphere}) {
    ExpectMeasuredMatchesDense(MakeTiny(Method::kPreLn, 4.0, 2, norm),
                               "pre_ln loops 2 " + std::string(KnobId(norm)));
  }
}

}  // namespace
}  // namespace spheret::nn
