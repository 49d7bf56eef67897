// The MLP's bias add and exact GELU as one autograd function (issue 47): g = GELU(a + b) from
// c_fc's product a (..., N) without its bias and the bias b (N). Unfused, LibTorch adds the bias in
// one pass, runs oneDNN's GELU in a second, and in the backward runs GELU's backward and then sums
// the bias gradient over the rows in a third; fused, the forward reads a once and writes g, and the
// backward reads a and dg once, writes da and sums db in the same loop (a + b is recomputed, not
// stored).
//
// GELU(x) = x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2, and erfc(z) for z >= 0 as Abramowitz and
// Stegun's 7.1.26, t (a1 + a2 t + ... + a5 t^4) exp(-z^2) with t = 1 / (1 + p z), absolute error
// <= 1.5e-7; so |GELU - the exact GELU| <= 1.5e-7 |x| / 2 and the backward, Phi(x) + x phi(x), as
// close. exp(-z^2) serves both, as phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
//
// CPU, fp32, contiguous, with AVX-512 (16 lanes, the last vector of a row masked); parallel over
// blocks of rows, and db summed block by block in a fixed order, so a run repeats bit for bit at
// any thread count. Elsewhere BiasGelu runs torch::gelu(a + b).
//
// LinearGelu(x, w, b) is GELU(x w^T + b) with c_fc's product made inside the function, into a
// buffer no one else sees: its backward writes da over that buffer (each value of the product is
// read before its place is written) instead of allocating and filling a new (rows, N) tensor,
// unless the graph is kept for another backward (retain_graph), when the product stays and da is
// new. The GPT's MLP uses it. (The MLP's whole backward in one function, dg also written over g,
// measured slower; docs/performance.md.)
#pragma once

#include <torch/types.h>

namespace spheret::nn {

// Whether the fused loop takes a and b: CPU fp32, a contiguous (..., N), b (N), the CPU with
// AVX-512.
bool BiasGeluFusable(const torch::Tensor& a, const torch::Tensor& b);

// GELU(a + b), the exact erf GELU, fused where BiasGeluFusable; differentiable in a and b (not
// twice).
torch::Tensor BiasGelu(const torch::Tensor& a, const torch::Tensor& b);

// Whether LinearGelu fuses: x (..., C) and w (N, C) contiguous CPU fp32, and b as BiasGeluFusable
// takes it for width N.
bool LinearGeluFusable(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// GELU(x w^T + b), the exact erf GELU; fused where LinearGeluFusable, torch::gelu(torch::linear(x,
// w, b)) elsewhere. Differentiable in x, w and b (not twice).
torch::Tensor LinearGelu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

}  // namespace spheret::nn
