// A deep connection's update fused with the LayerNorm that follows it (the next connection's input
// norm, or ln_f): one torch::autograd::Function whose forward takes h and F and returns the next
// hidden state h' and LN(h'), and whose backward takes both gradients, so that h' and its gradient
// are read once (issue 47). Two updates: the residual add h + F (pre_ln) and the sphere update
// (worker/nn/sphere_fused.h, the sphere methods).
//
// On the CPU in fp32 or fp64 the forward and the backward are each one loop over the rows (parallel
// over blocks of rows; the LayerNorm's weight and bias gradients are summed block by block in a
// fixed order, so a run repeats bit for bit at any thread count). Elsewhere (CUDA, reduced
// precision, mixed dtypes) both functions run the unfused ops: the update, then the LayerNorm.
#pragma once

#include <torch/types.h>

#include "worker/nn/norms.h"
#include "worker/nn/sphere_update.h"

namespace spheret::nn {

struct UpdateAndNorm {
  torch::Tensor out;     // h', (..., C)
  torch::Tensor normed;  // LN(h') by the given LayerNorm, (..., C)
};

// Whether the fused loop takes these tensors (else the functions below run the unfused ops).
bool NormFusable(const torch::Tensor& h, const torch::Tensor& f, const LayerNormImpl& norm);

// h' = h + F, and norm(h'). h, f: (..., C) with C = norm's width. Differentiable in h, f and the
// norm's weight and bias.
UpdateAndNorm AddLayerNormFused(const torch::Tensor& h, const torch::Tensor& f,
                                const LayerNormImpl& norm);

// h' = the sphere update of (h, F) with step size alpha (0-dim) under `rule`, as
// SphereUpdateFused, and norm(h'). Differentiable in h, f, alpha and the norm's parameters.
UpdateAndNorm SphereUpdateLayerNormFused(const torch::Tensor& h, const torch::Tensor& f,
                                         const torch::Tensor& alpha, const SphereRule& rule,
                                         const LayerNormImpl& norm);

// ScaleNormFunction(x, radius) (worker/nn/norms.h), r x / sqrt(max(||x||^2, 1e-12)) per row, as one
// autograd function: one pass over x forward and one backward (CPU, fp32 or fp64; elsewhere it
// runs ScaleNormFunction). Differentiable in x and radius (0-dim); not twice.
torch::Tensor ScaleNormFused(const torch::Tensor& x, const torch::Tensor& radius);

}  // namespace spheret::nn
