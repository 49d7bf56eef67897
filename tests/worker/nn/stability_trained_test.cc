// Proposition 6 on briefly trained tiny GPTs (every update's dense Jacobian against its bounds,
// and the stack's against the depth products), and Proposition 9's 2 x 2 example.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/worker/nn/dense_jacobian.h"
#include "tests/worker/nn/trained_tiny.h"
#include "worker/nn/gpt.h"
#include "worker/nn/sphere_connection.h"
#include "worker/nn/sphere_update.h"
#include "worker/nn/stability.h"

namespace spheret::nn {
namespace {

using testing::DenseJacobian;
using testing::Map;
using testing::SigmaMax;
using testing::SigmaMin;
using testing::SphereRules;
using testing::Tally;

// G = J_4 J_3 J_2 J_1 of `updates` on the stack's input against the depth products' bounds.
void CheckStack(const ConnectionOptions& options, const std::vector<Map>& updates,
                const torch::Tensor& input, const std::vector<double>& deltas,
                const std::vector<double>& margins, Tally* products) {
  const Map stack = [&](const torch::Tensor& x) {
    torch::Tensor y = x;
    for (const Map& update : updates) y = update(y);
    return y;
  };
  const torch::Tensor g = DenseJacobian(stack, input);
  const StabilitySummary summary = SummarizeStability(deltas, margins, {0, 0, 0, 0});
  double product_max = 1;
  for (double d : deltas) product_max *= 1 + d;
  ++products->samples;
  const double top = SigmaMax(g), bottom = SigmaMin(g);
  if (!(top <= product_max * (1 + 1e-10) && product_max <= summary.bound_max * (1 + 1e-12) &&
        bottom >= summary.bound_min * (1 - 1e-10) - 1e-12)) {
    ++products->violations;
    ADD_FAILURE() << "stack of " << MethodId(options.method) << ": sigma(G) " << top << " .. "
                  << bottom << ", prod(1+Delta) " << product_max << ", exp(S) " << summary.bound_max
                  << ", prod m " << summary.bound_min;
  }
}

// Every update's dense Jacobian of a briefly trained tiny GPT (trained_tiny.h) against its
// bounds, and the stack's against the product bounds.
void CheckTrainedModel(const ConnectionOptions& options, int64_t seed, int steps, Tally* tally,
                       Tally* products) {
  const testing::TrainedTiny& trained = testing::BrieflyTrained(options, seed, steps);
  Gpt model = trained.model;
  const torch::Tensor& block_input = trained.block_input;
  const CompositeModeGuard composite;
  std::vector<double> deltas, margins;
  std::vector<Map> updates;
  std::vector<torch::Tensor> inputs;
  for (int64_t b = 0; b < 2; ++b) {
    BlockImpl& block = model->block_at(b);
    for (int sub = 0; sub < 2; ++sub) {
      auto* conn = dynamic_cast<SpheretConnectionImpl*>(sub == 0 ? block.conn_attn.get()
                                                                 : block.conn_mlp.get());
      const Sublayer f = [&block, sub](const torch::Tensor& x) {
        return sub == 0 ? block.attn(x) : block.mlp(x);
      };
      updates.push_back([conn, f](const torch::Tensor& x) { return conn->forward(x, f); });
      torch::Tensor x = inputs.empty() ? block_input : torch::Tensor();
      if (!inputs.empty()) {
        torch::NoGradGuard no_grad;
        x = updates[updates.size() - 2](inputs.back());
      }
      inputs.push_back(x);
      const UpdateStability u = MeasureUpdateStability(
          [&](const torch::Tensor& y) { return f(conn->inner_norm.forward(y)); }, x, conn->alpha(),
          conn->rule, x.numel(), at::detail::createCPUGenerator(3));
      const torch::Tensor j = DenseJacobian(updates.back(), x);
      const double top = SigmaMax(j), bottom = SigmaMin(j);
      ++tally->samples;
      if (!(top <= 1 + u.delta() + 1e-10 && bottom >= u.margin() - 1e-10 && top >= 1 - 1e-10)) {
        ++tally->violations;
        ADD_FAILURE() << "trained " << MethodId(options.method) << " p=" << options.p << " update "
                      << updates.size() << ": sigma " << top << " .. " << bottom << ", 1+Delta "
                      << 1 + u.delta() << ", m " << u.margin();
      }
      deltas.push_back(u.delta());
      margins.push_back(u.margin());
    }
  }
  CheckStack(options, updates, inputs.front(), deltas, margins, products);
}

void ExpectNoViolations(const Tally& tally, const Tally& products) {
  std::printf(
      "Proposition 6 on trained tiny GPTs: %d updates, %d violations; %d stacks, %d "
      "violations of the depth products\n",
      tally.samples, tally.violations, products.samples, products.violations);
  EXPECT_EQ(tally.violations, 0);
  EXPECT_EQ(products.violations, 0);
}

// Every sphere rule (13: GeoNorm, p in {0.5, 1, 2, 4} and Cay, each capped and uncapped, and
// Proj), one model each, trained kBriefSteps steps: each update formula's bound on trained
// weights, each stack's products; the capped GeoNorm, p = 0.5 and p = 2 models are the ones
// jacobian_test.cc measures (one training when both run in one process). The exhaustive twin
// (...Exhaustive) trains three models per rule for 15 steps: more weight draws, no new branch.
TEST(Proposition6, BrieflyTrainedModelsObeyTheBoundsAndTheDepthProducts) {
  Tally tally, products;
  for (ConnectionOptions options : SphereRules(6)) {
    options.decay = Decay::kSqrt;
    CheckTrainedModel(options, 1, testing::kBriefSteps, &tally, &products);
  }
  EXPECT_EQ(tally.samples, 13 * 4);
  ExpectNoViolations(tally, products);
}

TEST(Proposition6, BrieflyTrainedModelsObeyTheBoundsAndTheDepthProductsExhaustive) {
  Tally tally, products;
  int64_t seed = 1;
  for (const ConnectionOptions& rule : SphereRules(6)) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      ConnectionOptions options = rule;
      options.decay = Decay::kSqrt;
      CheckTrainedModel(options, seed++, 15, &tally, &products);
    }
  }
  ExpectNoViolations(tally, products);
}

// Proposition 9's example: h = (r, 0), F(x) = A x with A = diag(c, c + K). F is parallel to h,
// so theta = 0, yet J = diag(1, 1 + alpha K): its norm is any R (K = (R - 1)/alpha) and it is
// singular at K = -1/alpha. theta alone cannot bound the Jacobian; ||B|| = |K| does.
TEST(Proposition9, ThetaZeroWithAnyNormAndASingularJacobian) {
  const double r = 2.0, c = 0.7, alpha = 0.5;
  for (const ConnectionOptions& options : SphereRules(2)) {
    SCOPED_TRACE(std::string(MethodId(options.method)) + " p=" + std::to_string(options.p));
    const SphereRule rule = MakeSphereRule(options);
    const torch::Tensor step = torch::tensor(alpha, torch::kDouble);
    const torch::Tensor h = torch::tensor({{{r, 0.0}}}, torch::kDouble);  // (1, 1, 2)
    for (const double big_r : {3.0, 10.0}) {
      const double k = (big_r - 1.0) / alpha;
      const torch::Tensor a = torch::diag(torch::tensor({c, c + k}, torch::kDouble));
      const Map f = [&](const torch::Tensor& x) { return torch::matmul(x, a); };  // A symmetric
      const Map update = [&](const torch::Tensor& x) {
        return SphereUpdateComposite(x, f(x), step, rule);
      };
      // theta = 0 up to the norms' floor: ||z||^2 is clamped at 1e-12 as everywhere, so the
      // measured angle is at most alpha * 1e-6 / r (2.5e-7 here).
      EXPECT_LE(MeasureSphereUpdate(h, f(h), step, rule).theta.item<double>(),
                alpha * 1e-6 / r * (1 + 1e-9));
      EXPECT_NEAR(SigmaMax(DenseJacobian(update, h)), big_r, 1e-9);
      const UpdateStability u =
          MeasureUpdateStability(f, h, step, rule, 2, at::detail::createCPUGenerator(1));
      EXPECT_NEAR(u.b_norm, k, 1e-9);
      EXPECT_LE(big_r, 1 + u.delta());
    }
    const double k = -1.0 / alpha;
    const torch::Tensor a = torch::diag(torch::tensor({c, c + k}, torch::kDouble));
    const Map update = [&](const torch::Tensor& x) {
      return SphereUpdateComposite(x, torch::matmul(x, a), step, rule);
    };
    EXPECT_NEAR(SigmaMin(DenseJacobian(update, h)), 0.0, 1e-12);
  }
}

}  // namespace
}  // namespace spheret::nn
