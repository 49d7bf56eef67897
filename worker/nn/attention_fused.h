// Causal self-attention from the packed projections, as one torch::autograd::Function (issue 47):
// qkv = [q | k | v] (B, T, 3C), the output of c_attn, to y (B, T, C), the heads side by side, which
// is SDPA's causal output transposed back to (B, T, C). The forward keeps each head's softmax
// P (B, nh, T, T) for the backward, which makes the math path's six matrix products; both skip the
// blocks of P above the diagonal. The products read q, k and v inside qkv and write y and the
// gradient of qkv in place, through the process's Fortran BLAS (LibTorch's MKL), so the split of
// qkv, the heads' transposes, the copy of y and the backward's concatenation are gone.
//
// In fp32, where the process's products go through oneDNN (linear.h: a CPU that is not Intel's,
// where MKL runs its generic path) and the CPU has AVX-512, heads of 16 to 64 values (the CPU
// presets' 32 among them) run as register tiles of their own instead (attention_tiles.h: no BLAS
// call, and tiles that stop at the diagonal); elsewhere through the BLAS. On an Intel CPU the tiles
// ran no faster than MKL's sgemm_, on an AMD EPYC faster than MKL's generic path
// (docs/performance.md).
//
// CPU, fp32 or fp64, T <= kFusedAttentionMaxT (P grows with T²), no dropout; elsewhere the caller
// runs scaled_dot_product_attention. Each head is computed alone, in the same order at any thread
// count, so a run repeats bit for bit.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "worker/nn/linear.h"

namespace spheret::nn {

inline constexpr int64_t kFusedAttentionMaxT = 256;

// Whether CausalAttentionFused takes qkv: CPU, fp32 or fp64, contiguous (B, T, 3C) with
// 1 <= T <= kFusedAttentionMaxT and C a multiple of n_head, and a BLAS gemm in the process.
bool AttentionFusable(const torch::Tensor& qkv, int64_t n_head);

// y (B, T, C): per head h of size hs = C / n_head, softmax(q_h k_h^T / sqrt(hs) + causal mask) v_h.
// Differentiable in qkv (not twice). Requires AttentionFusable(qkv, n_head). `gemm` picks the
// products: the register tiles where it is oneDNN and they take the heads, else the BLAS.
torch::Tensor CausalAttentionFused(const torch::Tensor& qkv, int64_t n_head, CpuGemm gemm);
inline torch::Tensor CausalAttentionFused(const torch::Tensor& qkv, int64_t n_head) {
  return CausalAttentionFused(qkv, n_head, CpuGemmBackend());
}

}  // namespace spheret::nn
