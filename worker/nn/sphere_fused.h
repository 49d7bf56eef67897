// The fused sphere update: the same map as SphereUpdateComposite (sphere_update.h) as one
// torch::autograd::Function with a hand-written backward.
//
// Forward and backward each make one pass over the (rows, C) input (a CPU loop parallel over rows,
// or one CUDA kernel for CUDA tensors when the library is built with SPHERET_CUDA), and the
// backward keeps only h, F and alpha (the composite form keeps about ten (rows, C) intermediates).
// Math in fp32 (fp64 stays fp64); the result has h's dtype. Thread-safe.
#pragma once

#include <torch/types.h>

#include "worker/nn/sphere_update.h"

namespace spheret::nn {

// h, f: (..., C) on one device; alpha: 0-dim. Differentiable in h, f and alpha.
torch::Tensor SphereUpdateFused(const torch::Tensor& h, const torch::Tensor& f,
                                const torch::Tensor& alpha, const SphereRule& rule);

// True when CUDA tensors run the CUDA kernel (built with SPHERET_CUDA); otherwise they run the
// composite form (autograd over ATen ops).
bool SphereCudaKernelBuilt();

}  // namespace spheret::nn
