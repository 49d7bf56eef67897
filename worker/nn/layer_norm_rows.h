// LayerNorm's forward and backward over one row of C values, for the fused CPU loops that run a
// connection's update and the next LayerNorm in one pass (worker/nn/norm_fused.h). Inlined into
// their callers, which the compiler builds for AVX-512, AVX2 and baseline x86-64
// (SPHERET_SIMD_CLONES). Their sums are row_sums.h's.
// The math of torch::layer_norm: mean and biased variance over the row, rstd = 1/sqrt(var + eps).
// Files that include this need -fopenmp-simd for their `omp simd` loops.
#pragma once

#include <cmath>
#include <cstdint>

#include "worker/nn/row_sums.h"

// GCC/Clang function multiversioning: the loader picks the AVX-512 clone on a CPU that has
// AVX-512F, else the AVX2 one on a CPU that has AVX2.
#ifndef SPHERET_SIMD_CLONES
#define SPHERET_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

namespace spheret::nn::row {

template <typename T>
struct NormStats {
  T mean;
  T rstd;
};

// y = (x - mean) * rstd * w + b over one row (b may be null); returns mean and rstd.
template <typename T>
__attribute__((always_inline)) inline NormStats<T> LayerNormRow(const T* x, const T* w, const T* b,
                                                                T eps, int64_t c, T* y) {
  T sum, squares;
  RowSums<1>(
      c, [&](auto* acc, int64_t i) { acc[0] += At<Elem<decltype(acc)>>(x, i); }, &sum);
  const T mean = sum / static_cast<T>(c);
  RowSums<1>(
      c,
      [&](auto* acc, int64_t i) {
        const auto d = At<Elem<decltype(acc)>>(x, i) - mean;
        acc[0] += d * d;
      },
      &squares);
  const T rstd = T(1) / std::sqrt(squares / static_cast<T>(c) + eps);
  if (b != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
  } else {
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) y[i] = (x[i] - mean) * rstd * w[i];
  }
  return {mean, rstd};
}

// LayerNorm's backward for one row: gx += d loss / d x from gy = d loss / d y, and the row's
// shares of the parameters' gradients: dw += gy * xhat, db += gy (db may be null).
template <typename T>
__attribute__((always_inline)) inline void LayerNormBackwardRow(const T* gy, const T* x,
                                                                NormStats<T> s, const T* w,
                                                                int64_t c, T* gx, T* dw, T* db) {
  T sums[2];  // of gy * w and of gy * w * (x - mean)
  RowSums<2>(
      c,
      [&](auto* acc, int64_t i) {
        using W = Elem<decltype(acc)>;
        const W g = At<W>(gy, i) * At<W>(w, i);
        acc[0] += g;
        acc[1] += g * (At<W>(x, i) - s.mean);
      },
      sums);
  const T mean_g = sums[0] / static_cast<T>(c);  // means of gy * w and of gy * w * xhat
  const T mean_gx = sums[1] * s.rstd / static_cast<T>(c);
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) {
    const T xhat = (x[i] - s.mean) * s.rstd;
    gx[i] += s.rstd * (gy[i] * w[i] - mean_g - xhat * mean_gx);
    dw[i] += gy[i] * xhat;
  }
  if (db != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) db[i] += gy[i];
  }
}

}  // namespace spheret::nn::row
