// nGPT (Loshchilov et al., "nGPT: Normalized Transformer with Representation Learning on the
// Hypersphere", arXiv 2410.01131), docs/methods.md §3. The hidden state lives on the unit sphere
// and each sublayer moves it toward the normalized output of F (paper §2.2):
//   h <- n(h + |alpha| * (n(F(h)) - h)),   n(x) = x / ||x||   (per token, over C)
// with a per-dimension eigen learning rate alpha. F sees h itself (no norm before the sublayer).
// The sublayers are nGPT's own (worker/nn/gpt.cc builds them for method ngpt):
//   attention: q, k rotated (RoPE), then s_qk * n(q), s_qk * n(k) per head (§2.3), softmax
//              scale sqrt(d_k) instead of 1/sqrt(d_k);
//   MLP:       SwiGLU, W_o (u * SiLU(nu)) with u <- s_u * u, nu <- s_nu * sqrt(C) * nu (§2.4).
// The GPT around it has no biases, unit token embeddings, no final norm, an untied output head
// E_output with logits scaled by s_z (§2.1), and re-normalizes every matrix along the embedding
// dimension after each optimizer step.
//
// Every learned scaling vector s follows the paper's (init, scale) rule: stored at `scale`, used
// as stored * (init / scale), so it starts at `init` and Adam moves it at the rate of a parameter
// of size `scale`.
#pragma once

#include "worker/nn/connection.h"

namespace spheret::nn {

// One of nGPT's scaling rules (§2.5 of the paper).
struct NgptScaling {
  double init = 1.0;                              // the effective value at init
  double scale = 1.0;                             // the stored value at init
  double factor() const { return init / scale; }  // effective = stored * factor()
};
// alpha_A, alpha_M: (alpha_init, 1/sqrt(C)).
NgptScaling NgptAlphaScaling(double alpha_init, int64_t n_embd);
// s_qk: (1, 1/sqrt(C)).
NgptScaling NgptQkScaling(int64_t n_embd);
// s_u, s_nu: (1, 1).
NgptScaling NgptUvScaling();
// s_z: (1, 1/sqrt(C)).
NgptScaling NgptLogitScaling(int64_t n_embd);

// x / sqrt(max(||x||^2, 1e-12)) over the last dim, in at least fp32.
torch::Tensor UnitNormalize(const torch::Tensor& x);

// nGPT's queries or keys (§2.3): s_qk * n(x) per head. x: (B, nh, T, hs) (after RoPE);
// s_qk: the effective scale, broadcastable to (nh, T, hs), e.g. (nh, 1, hs). Returns (B, nh, T,
// hs) in at least fp32.
torch::Tensor NgptQueryKey(const torch::Tensor& x, const torch::Tensor& s_qk);

// nGPT's SwiGLU hidden state (§2.4): u * SiLU(nu) after u <- s_u * u, nu <- s_nu * sqrt(C)
// * nu. u, nu: (B, T, H); s_u, s_nu: the effective scales (H). Returns (B, T, H).
torch::Tensor NgptSwiGlu(const torch::Tensor& u, const torch::Tensor& nu, const torch::Tensor& s_u,
                         const torch::Tensor& s_nu, int64_t n_embd);

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
// dimension: the rows of wte, wpe, lm_head (E_input, E_output), c_attn (W_q, W_k, W_v) and c_fc
// (W_u, W_nu), whose inputs are C wide, and the columns of each c_proj (W_o of attention and
// MLP), whose outputs are C wide. Vectors (the scalings, any bias) are untouched.
void NormalizeNgptWeights(torch::nn::Module& model);

}  // namespace spheret::nn
