#include "worker/nn/norms.h"

#include <torch/torch.h>

#include <cmath>

#include "worker/nn/connection.h"
#include "worker/nn/norm_fused.h"

namespace spheret::nn {

torch::Tensor Softplus(const torch::Tensor& x) {
  return torch::nn::functional::softplus(x);  // beta 1, threshold 20, as PyTorch.
}

torch::Tensor SoftplusInitAtMost(double init, double bound) {
  torch::Tensor x = torch::full({}, init, torch::kFloat);
  while (Softplus(x).item<float>() > static_cast<float>(bound)) {
    x = torch::nextafter(x, torch::full({}, -INFINITY));
  }
  return x;
}

// ---- DyT ----
torch::Tensor DytFunction(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& g,
                          const torch::Tensor& b) {
  torch::Tensor y = g * torch::tanh(a * x);
  return b.defined() ? y + b : y;
}

DytImpl::DytImpl(const DytOptions& options) {
  a = register_parameter("a", torch::full({}, options.alpha_init));
  g = register_parameter("g", torch::ones({options.n_embd}));
  if (options.bias) b = register_parameter("b", torch::zeros({options.n_embd}));
}

torch::Tensor DytImpl::forward(const torch::Tensor& x) { return DytFunction(x, a, g, b); }

// ---- LayerNorm ----
LayerNormImpl::LayerNormImpl(int64_t n_embd, bool with_bias, double eps_in) : eps(eps_in) {
  weight = register_parameter("weight", torch::ones({n_embd}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({n_embd}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
}

// ---- RMSNorm ----
RmsNormImpl::RmsNormImpl(int64_t n_embd, double eps_in) : eps(eps_in) {
  weight = register_parameter("weight", torch::ones({n_embd}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  return torch::rms_norm(x, {weight.size(0)}, weight, eps);
}

// ---- ScaleNorm ----
double ScaleNormGammaInit(int64_t n_embd) {
  const double root = std::sqrt(static_cast<double>(n_embd));
  return root > 20 ? root : std::log(std::expm1(root));
}

torch::Tensor ScaleNormRadius(const torch::Tensor& gamma, int64_t n_embd, RadiusParam param) {
  torch::Tensor r = Softplus(gamma);
  if (param == RadiusParam::kFree) return r;
  // clamp, not min/max: inclusive bounds, so the gradient passes at r = sqrt(C) (the init).
  return torch::clamp(r, 1.0, std::sqrt(static_cast<double>(n_embd)));
}

torch::Tensor ScaleNormFunction(const torch::Tensor& x, const torch::Tensor& radius) {
  const torch::Tensor x32 = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  const torch::Tensor norm = x32.square().sum(-1, /*keepdim=*/true).clamp_min(1e-12).sqrt();
  return (radius.to(x32.scalar_type()) * x32 / norm).to(x.scalar_type());  // (..., C)
}

ScaleNormImpl::ScaleNormImpl(const ScaleNormOptions& options_in) : options(options_in) {
  // r = sqrt(C) at init, on the clamp's upper bound but not above it (the gradient passes).
  gamma = register_parameter("gamma",
                             SoftplusInitAtMost(ScaleNormGammaInit(options.n_embd),
                                                std::sqrt(static_cast<double>(options.n_embd))));
}

torch::Tensor ScaleNormImpl::radius() const {
  return ScaleNormRadius(gamma, options.n_embd, options.radius_param);
}

torch::Tensor ScaleNormImpl::forward(const torch::Tensor& x) {
  return options.fused && !CompositeMode() ? ScaleNormFused(x, radius())
                                           : ScaleNormFunction(x, radius());
}

torch::nn::AnyModule MakeNorm(NormKind kind, int64_t n_embd, bool bias) {
  switch (kind) {
    case NormKind::kLayerNorm:
      return torch::nn::AnyModule(LayerNorm(n_embd, bias));
    case NormKind::kRmsNorm:
      return torch::nn::AnyModule(RmsNorm(n_embd));
    case NormKind::kNone:
      break;
  }
  return torch::nn::AnyModule(torch::nn::Identity());
}

}  // namespace spheret::nn
