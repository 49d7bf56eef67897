// Normalization layers used by the deep connections (docs/methods.md §1-2), in LibTorch's pattern:
// an options struct, a pure function holding the math, a module that owns the parameters.
//
// - DyT(x) = g * tanh(a x) + b, a scalar `a` (init 0.5), vectors g = 1 and b = 0 (b only with
// bias).
// - RMSNorm(x) = w * x / sqrt(mean(x^2) + eps), w = 1 at init.
// - ScaleNorm (first-layer, modified): h1 = r * h0 / ||h0||, r = clamp(softplus(gamma), 1, sqrt(C))
//   or softplus(gamma) when the radius is free; gamma starts where r = sqrt(C).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "config/connection_options.h"

namespace spheret::nn {

// softplus with PyTorch's semantics (x itself above 20), differentiable.
torch::Tensor Softplus(const torch::Tensor& x);

// A 0-dim fp32 tensor x near `init` with softplus(x) <= bound in fp32: `init` stepped down by
// ulps when rounding would put softplus(x) above the bound, where a clamp gives no gradient.
torch::Tensor SoftplusInitAtMost(double init, double bound);

// ---- DyT ----
struct DytOptions {
  int64_t n_embd = 768;
  bool bias = true;
  double alpha_init = 0.5;
};
torch::Tensor DytFunction(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& g,
                          const torch::Tensor& b);  // b may be undefined (no bias).
class DytImpl : public torch::nn::Module {
 public:
  explicit DytImpl(const DytOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor a, g, b;  // a: (), g: (C), b: (C) or undefined.
};
TORCH_MODULE(Dyt);

// ---- LayerNorm with an optional bias (nanoGPT's `bias` knob; torch's C++ LayerNorm has none) ----
class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t n_embd, bool bias, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;  // (C), (C) or undefined.
  double eps;
};
TORCH_MODULE(LayerNorm);

// ---- RMSNorm ----
class RmsNormImpl : public torch::nn::Module {
 public:
  explicit RmsNormImpl(int64_t n_embd, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;  // (C)
  double eps;
};
TORCH_MODULE(RmsNorm);

// ---- First-layer modified ScaleNorm ----
struct ScaleNormOptions {
  int64_t n_embd = 768;
  RadiusParam radius_param = RadiusParam::kClamp;
  // ScaleNormFused (worker/nn/norm_fused.h) outside composite mode; else ScaleNormFunction.
  bool fused = false;
};
// The radius r of `gamma` (a 0-dim tensor) for width n_embd.
torch::Tensor ScaleNormRadius(const torch::Tensor& gamma, int64_t n_embd, RadiusParam param);
// r * x / sqrt(max(||x||^2, 1e-12)) over the last dim; math in at least fp32.
torch::Tensor ScaleNormFunction(const torch::Tensor& x, const torch::Tensor& radius);
// gamma's initial value: sqrt(C) if sqrt(C) > 20 else log(exp(sqrt(C)) - 1), so r = sqrt(C).
double ScaleNormGammaInit(int64_t n_embd);
class ScaleNormImpl : public torch::nn::Module {
 public:
  explicit ScaleNormImpl(const ScaleNormOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor radius() const;  // r, a 0-dim tensor (differentiable).
  ScaleNormOptions options;
  torch::Tensor gamma;  // ()
};
TORCH_MODULE(ScaleNorm);

// A LayerNorm / RMSNorm / Identity module of width n_embd (LayerNorm eps 1e-5, bias as given).
torch::nn::AnyModule MakeNorm(NormKind kind, int64_t n_embd, bool bias);

}  // namespace spheret::nn
