// Test helpers for the Jacobian tests of worker/nn: dense Jacobians built row by row, their
// extreme singular values, and the sphere rules the Proposition 6 tests sample.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <limits>
#include <vector>

#include "config/connection_options.h"

namespace spheret::nn::testing {

using Map = std::function<torch::Tensor(const torch::Tensor&)>;
inline constexpr double kNoCap = std::numeric_limits<double>::infinity();

// d f(x) / d x as a dense (n x n) matrix, n = x.numel(), one backward per output.
inline torch::Tensor DenseJacobian(const Map& f, const torch::Tensor& x) {
  torch::AutoGradMode grad(true);
  const torch::Tensor input = x.detach().clone().requires_grad_(true);
  const torch::Tensor y = f(input).reshape({-1});
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < y.numel(); ++i) {
    rows.push_back(
        torch::autograd::grad({y[i]}, {input}, {}, /*retain_graph=*/true)[0].reshape({-1}));
  }
  return torch::stack(rows);
}

inline double SigmaMax(const torch::Tensor& m) {
  return torch::linalg_svdvals(m)[0].item<double>();
}
inline double SigmaMin(const torch::Tensor& m) {
  return torch::linalg_svdvals(m)[-1].item<double>();
}

// Every sphere rule at width c, capped (pi/4) and uncapped: GeoNorm, p-SpheretNorm with p in
// {0.5, 1, 2, 4}, Cay-SpheretNorm; and Proj-SpheretNorm (which has no cap). One layer, no decay,
// LayerNorm inside.
inline std::vector<ConnectionOptions> SphereRules(int64_t c) {
  std::vector<ConnectionOptions> rules;
  for (double cap : {0.78539816339744830962, kNoCap}) {
    ConnectionOptions geo;
    geo.method = Method::kGeoNorm;
    geo.angle_max = cap;
    rules.push_back(geo);
    for (double p : {0.5, 1.0, 2.0, 4.0}) {
      ConnectionOptions o;
      o.method = Method::kPSpheret;
      o.p = p;
      o.angle_max = cap;
      rules.push_back(o);
    }
    ConnectionOptions cay;  // the literal formulas of p = 2 and p = 1
    cay.method = Method::kCaySpheret;
    cay.angle_max = cap;
    rules.push_back(cay);
  }
  ConnectionOptions proj;
  proj.method = Method::kProjSpheret;
  rules.push_back(proj);
  for (ConnectionOptions& o : rules) {
    o.n_embd = c;
    o.n_layer = 1;
    o.decay = Decay::kNone;
    o.inner_norm = NormKind::kLayerNorm;
  }
  return rules;
}

// Samples checked against a bound, the violations, and how tight the bound came (sigma_max - 1
// over Delta at most, sigma_min over m at least).
struct Tally {
  int samples = 0, violations = 0;
  double tightest_max = 0, tightest_min = std::numeric_limits<double>::infinity();
};

}  // namespace spheret::nn::testing
