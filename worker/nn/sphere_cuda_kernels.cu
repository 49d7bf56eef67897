// CUDA kernels of the fused sphere update: one thread block per (row = token), every pass over the
// row's C values inside one kernel, all math in the compute dtype (fp32 or fp64). Only the kernels
// and their launches live here, with no ATen header, so nvcc compiles this file in seconds; the
// ATen side (dtype dispatch, device guard, stream, allocation) is sphere_cuda.cc, compiled by the
// host compiler with spheret_nn's precompiled header.
#include "worker/nn/sphere_cuda_kernels.h"

namespace spheret::nn::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 256;

// Sums each of v[0..N) over the block; every thread gets the totals. `shared` holds N * 32 values.
template <typename T, int N>
__device__ void BlockSum(T (&v)[N], T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = (blockDim.x + kWarp - 1) / kWarp;
  for (int k = 0; k < N; ++k) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      v[k] += __shfl_down_sync(0xffffffffu, v[k], offset);
    }
    if (lane == 0) shared[k * kWarp + warp] = v[k];
  }
  __syncthreads();
  if (warp == 0) {
    for (int k = 0; k < N; ++k) {
      v[k] = lane < warps ? shared[k * kWarp + lane] : T(0);
      for (int offset = kWarp / 2; offset > 0; offset /= 2) {
        v[k] += __shfl_down_sync(0xffffffffu, v[k], offset);
      }
    }
    if (lane == 0) {
      for (int k = 0; k < N; ++k) shared[k * kWarp] = v[k];
    }
  }
  __syncthreads();
  for (int k = 0; k < N; ++k) v[k] = shared[k * kWarp];
  __syncthreads();  // `shared` may be reused right after.
}

// Pass 1 of a row: dots = {<h,h>, <h,f>}, summed over the block.
template <typename T>
__device__ void RowDots(const T* hr, const T* fr, int64_t c, T (&dots)[2], T* shared) {
  dots[0] = dots[1] = T(0);
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    dots[0] += hr[i] * hr[i];
    dots[1] += hr[i] * fr[i];
  }
  BlockSum(dots, shared);
}

template <typename T>
__global__ void ForwardKernel(const T* __restrict__ h, const T* __restrict__ f,
                              const T* __restrict__ alpha, row::Rule rule, int64_t c,
                              T* __restrict__ out) {
  __shared__ T shared[2 * kWarp];
  const T* hr = h + blockIdx.x * c;
  const T* fr = f + blockIdx.x * c;
  T dots[2];  // hh, hf
  RowDots(hr, fr, c, dots, shared);
  const T mu = row::Mu(dots[0], dots[1]);
  T zz[1] = {T(0)};
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const T z = fr[i] - mu * hr[i];
    zz[0] += z * z;
  }
  BlockSum(zz, shared);
  const row::Forward<T> fw = row::SolveForward(dots[0], zz[0], *alpha, rule);
  T* o = out + blockIdx.x * c;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    o[i] = fw.c * hr[i] + fw.s * (fr[i] - mu * hr[i]);
  }
}

template <typename T>
__global__ void BackwardKernel(const T* __restrict__ g, const T* __restrict__ h,
                               const T* __restrict__ f, const T* __restrict__ alpha, row::Rule rule,
                               int64_t c, T* __restrict__ dh, T* __restrict__ df,
                               T* __restrict__ g_alpha) {
  __shared__ T shared[4 * kWarp];
  const int64_t offset = blockIdx.x * c;
  const T *gr = g + offset, *hr = h + offset, *fr = f + offset;
  T dots[2];  // hh, hf
  RowDots(hr, fr, c, dots, shared);
  const T mu = row::Mu(dots[0], dots[1]);
  T more[4] = {T(0), T(0), T(0), T(0)};  // zz, gh, gz, zh
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const T z = fr[i] - mu * hr[i];
    more[0] += z * z;
    more[1] += gr[i] * hr[i];
    more[2] += gr[i] * z;
    more[3] += z * hr[i];
  }
  BlockSum(more, shared);
  const T a = *alpha;
  const row::Forward<T> fw = row::SolveForward(dots[0], more[0], a, rule);
  const row::Backward<T> bw =
      row::SolveBackward(dots[0], dots[1], more[0], more[1], more[2], more[3], a, fw);
  if (threadIdx.x == 0) g_alpha[blockIdx.x] = bw.g_alpha;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const T gz_i = fw.s * gr[i] + T(2) * bw.g_zz * (fr[i] - mu * hr[i]);
    dh[offset + i] = fw.c * gr[i] - mu * gz_i + bw.g_hf * fr[i] + T(2) * bw.g_hh * hr[i];
    df[offset + i] = gz_i + bw.g_hf * hr[i];
  }
}

unsigned ThreadsFor(int64_t c) {
  const int64_t rounded = (c + kWarp - 1) / kWarp * kWarp;
  return static_cast<unsigned>(rounded < kMaxThreads ? rounded : kMaxThreads);
}

}  // namespace

template <typename T>
cudaError_t LaunchForward(const T* h, const T* f, const T* alpha, const row::Rule& rule,
                          int64_t rows, int64_t c, T* out, cudaStream_t stream) {
  ForwardKernel<T><<<static_cast<unsigned>(rows), ThreadsFor(c), 0, stream>>>(h, f, alpha, rule,
                                                                                c, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBackward(const T* grad, const T* h, const T* f, const T* alpha,
                           const row::Rule& rule, int64_t rows, int64_t c, T* dh, T* df,
                           T* g_alpha, cudaStream_t stream) {
  BackwardKernel<T><<<static_cast<unsigned>(rows), ThreadsFor(c), 0, stream>>>(
      grad, h, f, alpha, rule, c, dh, df, g_alpha);
  return cudaGetLastError();
}

template cudaError_t LaunchForward<float>(const float*, const float*, const float*,
                                          const row::Rule&, int64_t, int64_t, float*,
                                          cudaStream_t);
template cudaError_t LaunchForward<double>(const double*, const double*, const double*,
                                           const row::Rule&, int64_t, int64_t, double*,
                                           cudaStream_t);
template cudaError_t LaunchBackward<float>(const float*, const float*, const float*, const float*,
                                           const row::Rule&, int64_t, int64_t, float*, float*,
                                           float*, cudaStream_t);
template cudaError_t LaunchBackward<double>(const double*, const double*, const double*,
                                            const double*, const row::Rule&, int64_t, int64_t,
                                            double*, double*, double*, cudaStream_t);

}  // namespace spheret::nn::cuda
