// The row loops of the fused causal attention (worker/nn/attention_fused.cc): the causal softmax,
// left unnormalized with its inverse sums, and its backward, over one head's rows. fp32 runs 8
// lanes at a time through GCC/Clang vector extensions (F8), with a vectorized exp; fp64, the
// tests' reference precision, one element at a time with std::exp. Everything here is always
// inlined into the caller's builds for AVX2 with FMA and for baseline x86-64 (so GCC's -Wpsabi
// note, that a 32-byte vector argument's ABI differs with and without AVX, does not apply: the
// file that includes this compiles with -Wno-psabi).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace spheret::nn::attention_rows {

// exp(x) for x <= 0, the softmax's shifted logits, in fp32 (vectorizes, unlike std::exp): x = n ln2
// + r with |r| <= ln2 / 2 (Cody and Waite's two-part ln2), exp(r) by its Taylor series to r^7
// (remainder < 6e-9 relative), 2^n from the exponent bits with n >= -126: x below -87 gives
// exp(r) 2^-126 ~ 1e-38 instead of 0, nothing a softmax's sum of terms, one of them 1, can see.
// V is float, F8 or F16 (8 or 16 lanes, GCC/Clang vector extensions); E its int32 counterpart. The
// same operations on each lane, so a value does not depend on where in a row it falls.
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline int32_t ToInt(float x) { return static_cast<int32_t>(x); }
__attribute__((always_inline)) inline I8 ToInt(F8 x) { return __builtin_convertvector(x, I8); }
// 16 lanes, for the AVX-512 build of the rows (attention_rows_avx512.h).
typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
__attribute__((always_inline)) inline I16 ToInt(F16 x) { return __builtin_convertvector(x, I16); }

template <typename V, typename E>
__attribute__((always_inline)) inline V ExpNonPositive(V x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const V n = (x * 1.44269504088896341f + kRound) - kRound;
  const V r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  V poly = r * (1.0f / 5040) + 1.0f / 720;
  poly = poly * r + 1.0f / 120;
  poly = poly * r + 1.0f / 24;
  poly = poly * r + 1.0f / 6;
  poly = poly * r + 0.5f;
  poly = poly * r + 1.0f;
  poly = poly * r + 1.0f;
  E e = ToInt(n);
  e = e < -126 ? -126 : e;
  const E bits = (e + 127) << 23;
  V two_n;
  static_assert(sizeof two_n == sizeof bits);
  std::memcpy(&two_n, &bits, sizeof two_n);
  return poly * two_n;
}

__attribute__((always_inline)) inline F8 Load8(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void Store8(float* p, F8 v) { std::memcpy(p, &v, sizeof v); }
// The largest lane, and the lanes' sum (as a tree: lanes l and l + 4, then l and l + 2, then 0 and
// 1).
__attribute__((always_inline)) inline float MaxLane(F8 v) {
  v = v > __builtin_shuffle(v, I8{4, 5, 6, 7, 0, 1, 2, 3})
          ? v
          : __builtin_shuffle(v, I8{4, 5, 6, 7, 0, 1, 2, 3});
  v = v > __builtin_shuffle(v, I8{2, 3, 0, 1, 6, 7, 4, 5})
          ? v
          : __builtin_shuffle(v, I8{2, 3, 0, 1, 6, 7, 4, 5});
  return v[0] > v[1] ? v[0] : v[1];
}
__attribute__((always_inline)) inline float SumLanes(F8 v) {
  v += __builtin_shuffle(v, I8{4, 5, 6, 7, 0, 1, 2, 3});
  v += __builtin_shuffle(v, I8{2, 3, 0, 1, 6, 7, 4, 5});
  return v[0] + v[1];
}

// A softmax row over x[0, n) in place, left unnormalized: x[j] becomes exp(x[j] - max) and the
// result is 1 / the sum (the callers scale by it). 8 lanes at a time; the last n % 8 elements go
// through the same vector code from a padded copy.
__attribute__((always_inline)) inline float SoftmaxRow(float* x, int64_t n) {
  const int64_t whole = n - n % 8, tail = n - whole;
  F8 top8 = F8{} - std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < whole; j += 8) {
    const F8 v = Load8(x + j);
    top8 = v > top8 ? v : top8;
  }
  float top = MaxLane(top8);
  for (int64_t j = whole; j < n; ++j) top = x[j] > top ? x[j] : top;
  F8 sum8 = F8{};
  for (int64_t j = 0; j < whole; j += 8) {
    const F8 e = ExpNonPositive<F8, I8>(Load8(x + j) - top);
    Store8(x + j, e);
    sum8 += e;
  }
  if (tail > 0) {
    float pad[8];
    for (int64_t l = 0; l < 8; ++l) pad[l] = l < tail ? x[whole + l] : top;
    F8 e = ExpNonPositive<F8, I8>(Load8(pad) - top);
    for (int64_t l = 0; l < 8; ++l) {
      if (l >= tail) e[l] = 0;
    }
    sum8 += e;
    for (int64_t l = 0; l < tail; ++l) x[whole + l] = e[l];
  }
  return 1.0f / SumLanes(sum8);
}

// In fp64 (the tests' reference precision) one element at a time with std::exp.
__attribute__((always_inline)) inline double SoftmaxRow(double* x, int64_t n) {
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) top = std::max(top, x[j]);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += x[j] = std::exp(x[j] - top);
  return 1.0 / sum;
}

// <a, b> over [0, n).
__attribute__((always_inline)) inline float Dot(const float* a, const float* b, int64_t n) {
  const int64_t whole = n - n % 8;
  F8 sum8 = F8{};
  for (int64_t j = 0; j < whole; j += 8) sum8 += Load8(a + j) * Load8(b + j);
  float sum = SumLanes(sum8);
  for (int64_t j = whole; j < n; ++j) sum += a[j] * b[j];
  return sum;
}
__attribute__((always_inline)) inline double Dot(const double* a, const double* b, int64_t n) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

// Rows [r0, r1) of one head's E (row stride t), holding the scaled logits of keys [0, r1): row r
// becomes exp(logit - max) at keys [0, r] and zeros at keys (r, r1), and inv[r] 1 / its sum, so
// that P = inv E is the causal softmax.
template <typename T>
__attribute__((always_inline)) inline void SoftmaxRowsBody(T* e, int64_t t, int64_t r0, int64_t r1,
                                                           T* inv) {
  for (int64_t r = r0; r < r1; ++r) {
    T* row = e + r * t;
    inv[r] = SoftmaxRow(row, r + 1);
    for (int64_t j = r + 1; j < r1; ++j) row[j] = 0;
  }
}

// Rows [r0, r1) of one head's dS (row stride t), holding dP = dY V^T at keys [0, r1): each row
// becomes scale P (dP - <P, dP>) with P = inv E, the gradient of the logits before the scale (zero
// where E is).
template <typename T>
__attribute__((always_inline)) inline void SoftmaxBackwardRowsBody(const T* e, const T* inv, T* ds,
                                                                   int64_t t, int64_t r0,
                                                                   int64_t r1, T scale) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* er = e + r * t;
    T* dr = ds + r * t;
    const T dot = Dot(er, dr, r + 1) * inv[r], factor = scale * inv[r];
#pragma omp simd
    for (int64_t j = 0; j < r1; ++j) dr[j] = factor * er[j] * (dr[j] - dot);
  }
}

// rows [r0, r1) of x (row stride ld, n values each) times by[r].
template <typename T>
__attribute__((always_inline)) inline void ScaleRowsBody(T* x, int64_t ld, int64_t r0, int64_t r1,
                                                         int64_t n, const T* by) {
  for (int64_t r = r0; r < r1; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) x[r * ld + j] *= by[r];
  }
}

}  // namespace spheret::nn::attention_rows
