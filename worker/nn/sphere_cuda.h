// CUDA kernels of the fused sphere update, built only with SPHERET_CUDA (sphere_cuda.cc over
// sphere_cuda_kernels.cu); without it, sphere_cuda_absent.cc returns nullptr from
// CudaSphereKernels().
#pragma once

#include <torch/types.h>

#include <tuple>

#include "worker/nn/sphere_row_math.h"

namespace spheret::nn {

struct SphereCudaKernels {
  // h, f: contiguous (rows, C) CUDA tensors of one dtype (fp32 or fp64); alpha: 0-dim, same dtype.
  torch::Tensor (*forward)(const torch::Tensor& h, const torch::Tensor& f,
                           const torch::Tensor& alpha, const row::Rule& rule);
  // Returns (dh, df, g_alpha per row).
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> (*backward)(const torch::Tensor& grad,
                                                                      const torch::Tensor& h,
                                                                      const torch::Tensor& f,
                                                                      const torch::Tensor& alpha,
                                                                      const row::Rule& rule);
};

// The kernels, or nullptr when this build has no CUDA kernel.
const SphereCudaKernels* CudaSphereKernels();

}  // namespace spheret::nn
