// The fused sphere update's CUDA kernels as plain launches over raw (rows, C) row-major arrays:
// the contract between sphere_cuda_kernels.cu (nvcc, no ATen) and sphere_cuda.cc (ATen). Each
// launch returns cudaGetLastError() after queueing its kernel on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/nn/sphere_row_math.h"

namespace spheret::nn::cuda {

// out = the rule's update of each row of h by the row of f; alpha: one value on the device.
template <typename T>
cudaError_t LaunchForward(const T* h, const T* f, const T* alpha, const row::Rule& rule,
                          int64_t rows, int64_t c, T* out, cudaStream_t stream);

// dh, df: the gradients of the rows; g_alpha: each row's share of alpha's gradient (rows values).
template <typename T>
cudaError_t LaunchBackward(const T* grad, const T* h, const T* f, const T* alpha,
                           const row::Rule& rule, int64_t rows, int64_t c, T* dh, T* df,
                           T* g_alpha, cudaStream_t stream);

}  // namespace spheret::nn::cuda
