// The sphere connections (geonorm, proj_spheret, cay_spheret, p_spheret) of docs/methods.md §2:
// F sees inner_norm(h); the update rotates h on its sphere by the method's rule with step
//   alpha_l = clamp(softplus(a), max=1) * lambda_l   (step_param clamp, a init ln(e - 1))
//   alpha_l = lambda_l * sigmoid(a)                 (step_param sigmoid, a init ln 19)
#pragma once

#include "worker/nn/connection.h"
#include "worker/nn/sphere_update.h"

namespace spheret::nn {

// The step size alpha_l of learnable `a` (0-dim) with decay factor `lambda`.
torch::Tensor SphereStepSize(const torch::Tensor& a, double lambda, StepParam param);

class SpheretConnectionImpl : public ConnectionImpl {
 public:
  SpheretConnectionImpl(const ConnectionOptions& options, const SublayerPosition& position);
  // The sphere update alone, with this module's alpha: F given, no inner norm.
  torch::Tensor update(const torch::Tensor& h, const torch::Tensor& f);
  torch::Tensor alpha() const;                             // alpha_l, 0-dim, differentiable in a.
  const LayerNormImpl* input_layer_norm() const override;  // inner_norm when a LayerNorm

  torch::Tensor a;  // () learnable step parameter.
  torch::nn::AnyModule inner_norm;
  SphereRule rule;
  double lambda;  // lambda_l, the decay factor.
  StepParam step_param;
  bool fused;

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;
  // The update fused with chain->next (SphereUpdateLayerNormFused) when given and `fused`.
  torch::Tensor StepChained(const torch::Tensor& h, const Sublayer& sublayer,
                            ConnectionDiagnostics* diagnostics, NormChain* chain) override;

 private:
  // Fills `diagnostics` for the update h -> out (F(...) = f): ||h'||, mean theta, theta^2 and the
  // share at the cap, alpha, the radial share, and under a StabilityProbeGuard Proposition 6's
  // b_norm, eta, delta, margin and min_abs_cos (worker/nn/stability.h).
  void Diagnose(const torch::Tensor& h, const torch::Tensor& f, const torch::Tensor& out,
                const Sublayer& sublayer, ConnectionDiagnostics* diagnostics);
};
TORCH_MODULE(SpheretConnection);

}  // namespace spheret::nn
