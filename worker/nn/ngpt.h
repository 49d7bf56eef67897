// nGPT's normalized residual (Loshchilov et al., "nGPT", 2024), docs/methods.md §3: the hidden
// state lives on the unit sphere and each sublayer moves it toward the normalized output of F,
//   h <- n(h + |alpha| * (n(F(h)) - h)),   n(x) = x / ||x||   (per token, over C)
// with a per-dimension eigen learning rate alpha. As in nGPT, alpha is stored at 1/sqrt(C) and
// used scaled by alpha_init * sqrt(C), so it starts at alpha_init (0.05) and Adam moves it at the
// rate of a unit-scale parameter. F sees h itself (no norm before the sublayer). The GPT around
// it unit-normalizes the embedding output, has no final norm, scales the logits by s_z and
// re-normalizes its matrices along the embedding dimension after every optimizer step.
// Left out of nGPT (the backbone stays nanoGPT's): the q/k scaling s_qk, the MLP's s_u/s_v,
// RoPE and SwiGLU.
#pragma once

#include "worker/nn/connection.h"

namespace spheret::nn {

// x / sqrt(max(||x||^2, 1e-12)) over the last dim, in at least fp32.
torch::Tensor UnitNormalize(const torch::Tensor& x);

class UnitNormImpl : public torch::nn::Module {
 public:
  torch::Tensor forward(const torch::Tensor& x) { return UnitNormalize(x); }
};
TORCH_MODULE(UnitNorm);

class NgptConnectionImpl : public ConnectionImpl {
 public:
  explicit NgptConnectionImpl(const ConnectionOptions& options);
  // The effective eigen learning rate |alpha| (C), differentiable.
  torch::Tensor step() const;

  torch::Tensor alpha;  // (C) stored parameter, init 1/sqrt(C).
  double alpha_scale;   // alpha_init * sqrt(C)

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;
};
TORCH_MODULE(NgptConnection);

// Normalizes, in place and without gradient, every matrix of `model` along its embedding
// dimension: the rows of wte and wpe and of c_attn and c_fc (their inputs are C wide), the
// columns of each c_proj (its outputs are C wide). Biases and other parameters are untouched.
void NormalizeNgptWeights(torch::nn::Module& model);

}  // namespace spheret::nn
