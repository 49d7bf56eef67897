// Causal self-attention from the packed projections, as one torch::autograd::Function (issue 47):
// qkv = [q | k | v] (B, T, 3C), the output of c_attn, to y (B, T, C), the heads side by side, which
// is SDPA's causal output transposed back to (B, T, C). The forward keeps each head's softmax
// P (B, nh, T, T) for the backward, which makes the math path's six matrix products; both skip the
// blocks of P above the diagonal. The products read q, k and v inside qkv and write y and the
// gradient of qkv in place, through the process's Fortran BLAS (LibTorch's MKL), so the split of
// qkv, the heads' transposes, the copy of y and the backward's concatenation are gone.
//
// CPU, fp32 or fp64, T <= kFusedAttentionMaxT (P grows with T²), no dropout; elsewhere the caller
// runs scaled_dot_product_attention. Each head is computed alone, in the same order at any thread
// count, so a run repeats bit for bit.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace spheret::nn {

inline constexpr int64_t kFusedAttentionMaxT = 256;

// Whether CausalAttentionFused takes qkv: CPU, fp32 or fp64, contiguous (B, T, 3C) with
// 1 <= T <= kFusedAttentionMaxT and C a multiple of n_head, and a BLAS gemm in the process.
bool AttentionFusable(const torch::Tensor& qkv, int64_t n_head);

// y (B, T, C): per head h of size hs = C / n_head, softmax(q_h k_h^T / sqrt(hs) + causal mask) v_h.
// Differentiable in qkv (not twice). Requires AttentionFusable(qkv, n_head).
torch::Tensor CausalAttentionFused(const torch::Tensor& qkv, int64_t n_head);

}  // namespace spheret::nn
