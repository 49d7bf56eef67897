#include "worker/nn/sphere_connection.h"

#include <torch/torch.h>

#include <cmath>

#include "worker/nn/norms.h"
#include "worker/nn/sphere_fused.h"

namespace spheret::nn {

torch::Tensor SphereStepSize(const torch::Tensor& a, double lambda, StepParam param) {
  if (param == StepParam::kSigmoid) return lambda * torch::sigmoid(a);
  // clamp (inclusive), not min: the gradient passes at softplus(a) = 1, the init.
  return torch::clamp_max(Softplus(a), 1.0) * lambda;
}

SpheretConnectionImpl::SpheretConnectionImpl(const ConnectionOptions& options,
                                             const SublayerPosition& position)
    : inner_norm(MakeNorm(options.inner_norm, options.n_embd, options.bias)),
      rule(MakeSphereRule(options)),
      lambda(DecayFactor(options, position)),
      step_param(options.step_param),
      fused(options.fused) {
  a = register_parameter("a", step_param == StepParam::kSigmoid
                                  ? torch::full({}, std::log(19.0))
                                  : SoftplusInitAtMost(std::log(std::exp(1.0) - 1.0), 1.0));
  register_module("inner_norm", inner_norm.ptr());
}

torch::Tensor SpheretConnectionImpl::alpha() const { return SphereStepSize(a, lambda, step_param); }

torch::Tensor SpheretConnectionImpl::update(const torch::Tensor& h, const torch::Tensor& f) {
  return fused && !CompositeMode() ? SphereUpdateFused(h, f, alpha(), rule)
                                   : SphereUpdateComposite(h, f, alpha(), rule);
}

torch::Tensor SpheretConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                          ConnectionDiagnostics* diagnostics) {
  const torch::Tensor f = sublayer(inner_norm.forward(h));  // (B, T, C)
  const torch::Tensor out = update(h, f);
  if (diagnostics != nullptr) {
    const torch::Tensor alpha_l = alpha().detach();
    const SphereGeometry geometry = MeasureSphereUpdate(h, f, alpha_l, rule);
    diagnostics->hidden_norm = out.detach().to(torch::kFloat).norm(2, -1).mean().item<double>();
    diagnostics->theta = geometry.theta.mean().item<double>();
    diagnostics->alpha = alpha_l.item<double>();
    diagnostics->radial = geometry.radial.mean().item<double>();
  }
  return out;
}

}  // namespace spheret::nn
