// The fp32 softmax rows of the fused causal attention (worker/nn/attention_fused.cc) in AVX-512,
// 16 lanes at a time, for the CPUs that have it; attention_rows.h keeps the AVX2 and baseline
// builds. A row's last vector is masked instead of copied to a padded buffer, and the zeros past a
// row's diagonal are written by the same masked stores, so a short row costs a few vectors and no
// scalar loop. The exp is attention_rows.h's ExpNonPositive, the same operations on each lane as
// in the other builds; only the summation order differs (16 lanes against 8). Every function here
// is always inlined into the callers' target("avx512f") builds (the file that includes this
// compiles with -Wno-psabi, as for attention_rows.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "worker/nn/attention_rows.h"

namespace spheret::nn::attention_rows {

#define SPHERET_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) inline

// The first n lanes (none for n <= 0, all for n >= 16).
SPHERET_AVX512_INLINE __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// x[0, n) becomes exp(x - max) and x[n, width) zeros; returns 1 / the sum. n <= width.
SPHERET_AVX512_INLINE float SoftmaxRow16(float* x, int64_t n, int64_t width) {
  __m512 top = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    top = _mm512_max_ps(top, _mm512_mask_loadu_ps(top, FirstLanes(n - j), x + j));
  }
  const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(top));
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j < n; j += 16) {
    const __mmask16 live = FirstLanes(n - j);
    // Lanes past n are zeroed after the exp, whatever it made of them.
    const F16 shifted = _mm512_sub_ps(_mm512_maskz_loadu_ps(live, x + j), shift);
    const __m512 e = _mm512_maskz_mov_ps(live, ExpNonPositive<F16, I16>(shifted));
    _mm512_mask_storeu_ps(x + j, FirstLanes(width - j), e);
    sum = _mm512_add_ps(sum, e);
  }
  for (; j < width; j += 16) {
    _mm512_mask_storeu_ps(x + j, FirstLanes(width - j), _mm512_setzero_ps());
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
}

// A row of dS over keys [0, width) from E's row er (zero past n) and dP's row dr (in place):
// scale inv E (dP - inv <E, dP>), zeros past n.
SPHERET_AVX512_INLINE void SoftmaxBackwardRow16(const float* er, float inv, float* dr, int64_t n,
                                                int64_t width, float scale) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 live = FirstLanes(n - j);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(live, er + j), _mm512_maskz_loadu_ps(live, dr + j),
                          acc);
  }
  const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(acc) * inv);
  const __m512 factor = _mm512_set1_ps(scale * inv);
  int64_t j = 0;
  for (; j < n; j += 16) {
    const __mmask16 lanes = FirstLanes(width - j);
    const __m512 e = _mm512_maskz_loadu_ps(lanes, er + j);
    const __m512 d = _mm512_maskz_loadu_ps(lanes, dr + j);
    _mm512_mask_storeu_ps(dr + j, lanes,
                          _mm512_mul_ps(_mm512_mul_ps(factor, e), _mm512_sub_ps(d, dot)));
  }
  for (; j < width; j += 16) {
    _mm512_mask_storeu_ps(dr + j, FirstLanes(width - j), _mm512_setzero_ps());
  }
}

// SoftmaxRowsBody and SoftmaxBackwardRowsBody (attention_rows.h) for fp32 in AVX-512.
SPHERET_AVX512_INLINE void SoftmaxRowsAvx512Body(float* e, int64_t t, int64_t r0, int64_t r1,
                                                 float* inv) {
  for (int64_t r = r0; r < r1; ++r) inv[r] = SoftmaxRow16(e + r * t, r + 1, r1);
}

SPHERET_AVX512_INLINE void SoftmaxBackwardRowsAvx512Body(const float* e, const float* inv,
                                                         float* ds, int64_t t, int64_t r0,
                                                         int64_t r1, float scale) {
  for (int64_t r = r0; r < r1; ++r) {
    SoftmaxBackwardRow16(e + r * t, inv[r], ds + r * t, r + 1, r1, scale);
  }
}

#undef SPHERET_AVX512_INLINE

}  // namespace spheret::nn::attention_rows
