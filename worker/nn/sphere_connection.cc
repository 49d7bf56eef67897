#include "worker/nn/sphere_connection.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <utility>

#include "protocol/metric_catalog.h"
#include "worker/nn/norm_fused.h"
#include "worker/nn/norms.h"
#include "worker/nn/sphere_fused.h"
#include "worker/nn/stability.h"

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

const LayerNormImpl* SpheretConnectionImpl::input_layer_norm() const {
  return dynamic_cast<const LayerNormImpl*>(inner_norm.ptr().get());
}

torch::Tensor SpheretConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                          ConnectionDiagnostics* diagnostics) {
  NormChain none;
  return StepChained(h, sublayer, diagnostics, &none);
}

torch::Tensor SpheretConnectionImpl::StepChained(const torch::Tensor& h, const Sublayer& sublayer,
                                                 ConnectionDiagnostics* diagnostics,
                                                 NormChain* chain) {
  const torch::Tensor f =
      sublayer(chain->normed_in.defined() ? chain->normed_in : inner_norm.forward(h));  // (B,T,C)
  torch::Tensor out;
  if (chain->next != nullptr && fused && !CompositeMode()) {
    UpdateAndNorm both = SphereUpdateLayerNormFused(h, f, alpha(), rule, *chain->next);
    out = both.out;
    chain->normed_out = both.normed;
  } else {
    out = update(h, f);
  }
  if (diagnostics != nullptr) Diagnose(h, f, out, sublayer, diagnostics);
  return out;
}

void SpheretConnectionImpl::Diagnose(const torch::Tensor& h, const torch::Tensor& f,
                                     const torch::Tensor& out, const Sublayer& sublayer,
                                     ConnectionDiagnostics* diagnostics) {
  const torch::Tensor alpha_l = alpha().detach();
  const SphereGeometry geometry = MeasureSphereUpdate(h, f, alpha_l, rule);
  diagnostics->hidden_norm = out.detach().to(torch::kFloat).norm(2, -1).mean().item<double>();
  diagnostics->theta = geometry.theta.mean().item<double>();
  diagnostics->alpha = alpha_l.item<double>();
  diagnostics->radial = geometry.radial.mean().item<double>();
  // theta^2 as a mean over tokens (not the square of the mean), and the share of tokens whose
  // angle sits at the cap.
  diagnostics->extra.emplace_back(protocol::kTheta2, geometry.theta.square().mean().item<double>());
  if (rule.capped() && std::isfinite(rule.angle_max)) {
    const torch::Tensor at_cap = geometry.theta >= rule.angle_max * (1.0 - 1e-6);
    diagnostics->extra.emplace_back(protocol::kAtCap,
                                    at_cap.to(torch::kDouble).mean().item<double>());
  }
  const StabilityProbeGuard::Settings probe = StabilityProbe();
  if (probe.iterations <= 0) return;
  const UpdateStability s = MeasureUpdateStability(
      [&](const torch::Tensor& x) { return sublayer(inner_norm.forward(x)); }, h, alpha_l, rule,
      probe.iterations, at::detail::createCPUGenerator(probe.seed));
  for (const auto& [field, value] : {std::pair<const char*, double>{protocol::kBNorm, s.b_norm},
                                     {protocol::kEta, s.eta},
                                     {protocol::kDelta, s.delta()},
                                     {protocol::kMargin, s.margin()},
                                     {protocol::kMinAbsCos, s.min_abs_cos}}) {
    diagnostics->extra.emplace_back(field, value);
  }
}

}  // namespace spheret::nn
