// LayerNorm's forward and backward over one row of C values, for the fused CPU loops that run a
// connection's update and the next LayerNorm in one pass (worker/nn/norm_fused.h). Inlined into
// their callers, which the compiler builds for AVX2 and baseline x86-64 (SPHERET_SIMD_CLONES).
// The math of torch::layer_norm: mean and biased variance over the row, rstd = 1/sqrt(var + eps).
// Files that include this need -fopenmp-simd for the `omp simd` reductions.
#pragma once

#include <cmath>
#include <cstdint>

// GCC/Clang function multiversioning: the loader picks the AVX2 clone on a CPU that has it.
#ifndef SPHERET_SIMD_CLONES
#define SPHERET_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
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
  T sum = 0, squares = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < c; ++i) sum += x[i];
  const T mean = sum / static_cast<T>(c);
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < c; ++i) squares += (x[i] - mean) * (x[i] - mean);
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
  T mean_g = 0, mean_gx = 0;  // means of gy * w and of gy * w * xhat
#pragma omp simd reduction(+ : mean_g, mean_gx)
  for (int64_t i = 0; i < c; ++i) {
    const T g = gy[i] * w[i];
    mean_g += g;
    mean_gx += g * (x[i] - s.mean) * s.rstd;
  }
  mean_g /= static_cast<T>(c);
  mean_gx /= static_cast<T>(c);
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
