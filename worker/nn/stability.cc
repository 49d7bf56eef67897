#include "worker/nn/stability.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace spheret::nn {
namespace {

thread_local StabilityProbeGuard::Settings probe_settings;

}  // namespace

double UpdateStability::margin() const { return std::max(0.0, min_abs_cos - delta()); }

UpdateStability MeasureUpdateStability(const Operator& f, const torch::Tensor& h_in,
                                       const torch::Tensor& alpha, const SphereRule& rule,
                                       int64_t iterations, torch::Generator generator) {
  torch::AutoGradMode grad(true);
  const torch::ScalarType type =
      h_in.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const torch::Tensor h = h_in.detach().to(type);  // (1, T, C)
  Linearization df(f, h);
  const torch::Tensor fh = df.y().to(type);
  const torch::Tensor r2 = h.square().sum(-1, true).clamp_min(1e-12);  // (1, T, 1)
  const torch::Tensor c = (h * fh).sum(-1, true) / r2;                 // radial coefficient
  const torch::Tensor z = fh - c * h;                                  // (1, T, C) tangent part
  const torch::Tensor eta = (z.norm(2, -1) / r2.sqrt().squeeze(-1));   // (1, T)
  // theta exactly as the update computes it (the 1e-12 clamp on ||z||^2 included).
  const torch::Tensor step = alpha.detach().to(type).abs();
  const torch::Tensor beta =
      step * z.square().sum(-1).clamp_min(1e-12).sqrt() / r2.sqrt().squeeze(-1);
  const torch::Tensor theta = RotationAngle(beta, rule);

  // B = DF - diag(c_t) (x) I and its transpose, as products.
  auto b = [&](const torch::Tensor& v) { return df.Jv(v).to(type) - c * v; };
  auto b_t = [&](const torch::Tensor& u) { return df.JTu(u).to(type) - c * u; };
  const torch::Tensor start =
      torch::randn(h.sizes(), generator, torch::TensorOptions(torch::kDouble)).to(h.options());
  UpdateStability s;
  s.b_norm = MeasureSingularRange(b, b_t, start, iterations, generator).sigma_max;
  s.eta = eta.max().item<double>();
  s.alpha = step.item<double>();
  s.min_abs_cos = torch::cos(theta).abs().min().item<double>();
  return s;
}

StabilitySummary SummarizeStability(const std::vector<double>& delta,
                                    const std::vector<double>& margin,
                                    const std::vector<double>& theta2) {
  StabilitySummary summary;
  for (size_t l = 0; l < delta.size(); ++l) {
    summary.delta_sum += delta[l];
    summary.theta2_sum += theta2[l];
    summary.bound_min *= margin[l];
  }
  summary.bound_max = std::exp(summary.delta_sum);
  const int64_t n = static_cast<int64_t>(theta2.size());
  for (int64_t m = 1; 2 * m <= n; m *= 2) {  // I_m = {m, ..., 2m - 1}, 1-based
    double budget = 0;
    for (int64_t l = m; l <= 2 * m - 1; ++l) budget += theta2[l - 1];
    summary.budget_start.push_back(m);
    summary.budget.push_back(budget);
  }
  return summary;
}

TokenCollapse MeasureTokenCollapse(const torch::Tensor& h, int64_t max_sequences) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = h.detach().to(torch::kDouble);  // (B, T, C)
  const int64_t t = x.size(1);
  if (t < 2) return TokenCollapse{1.0, 1.0};
  const torch::Tensor u = x / x.norm(2, -1, true).clamp_min(1e-30);  // unit states
  // sum over pairs s != t of <u_s, u_t> = ||sum_t u_t||^2 - T.
  const torch::Tensor pair_sum = u.sum(1).square().sum(-1) - static_cast<double>(t);  // (B)
  TokenCollapse collapse;
  collapse.mean_cos = (pair_sum / static_cast<double>(t * (t - 1))).mean().item<double>();
  const torch::Tensor sigma =
      torch::linalg_svdvals(x.narrow(0, 0, std::min(x.size(0), max_sequences)));  // (b, k)
  const torch::Tensor p = sigma / sigma.sum(-1, true).clamp_min(1e-300);
  const torch::Tensor entropy = -(p * torch::log(p.clamp_min(1e-300))).sum(-1);  // 0 ln 0 = 0
  collapse.effective_rank = torch::exp(entropy).mean().item<double>();
  return collapse;
}

StabilityProbeGuard::StabilityProbeGuard(int64_t iterations, uint64_t seed)
    : previous_(probe_settings) {
  probe_settings = Settings{iterations, seed};
}
StabilityProbeGuard::~StabilityProbeGuard() { probe_settings = previous_; }
StabilityProbeGuard::Settings StabilityProbe() { return probe_settings; }

}  // namespace spheret::nn
