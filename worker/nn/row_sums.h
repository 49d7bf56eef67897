// Sums over one row of C values for the fused CPU row kernels (layer_norm_rows.h, sphere_fused.cc,
// norm_fused.cc), in 64-byte vectors with two accumulators each, summed lane by lane in a tree.
//
// Why not `#pragma omp simd reduction`: GCC lowers it to one vector accumulator (a chain of
// dependent adds, one per vector of the row) and sums that accumulator's lanes one after the other
// in scalar code (16 dependent adds for fp32 in an AVX-512 build) for every sum of every row; at
// the rows' widths (C = 128 to 768) those chains, not the loads, held the kernels' time.
//
// The vectors are GCC vector extensions of 64 bytes: one zmm register in an AVX-512 clone, two ymm
// in an AVX2 one, four xmm in the baseline build, so one source serves every clone of its caller
// (SPHERET_SIMD_CLONES). The order of the additions is fixed by C alone, so a row's sums do not
// depend on the thread count or on where the row sits in memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace spheret::nn::row {

// 64 bytes of T: 16 floats or 8 doubles.
template <typename T>
struct VecOf {
  typedef T type __attribute__((vector_size(64)));
};
template <typename T>
using Vec = typename VecOf<T>::type;

template <typename T>
constexpr int64_t kLanes = 64 / sizeof(T);

// x[i .. i + lanes) as W: a vector (unaligned load) or, where W is T itself, one value.
template <typename W, typename T>
[[gnu::always_inline]] inline W At(const T* x, int64_t i) {
  W w;
  std::memcpy(&w, x + i, sizeof(W));
  return w;
}

// What an accumulator pointer points to: Vec<T> or T.
template <typename P>
using Elem = std::remove_pointer_t<P>;

// The lanes of v summed as a tree: halves added until one lane is left.
[[gnu::always_inline]] inline float LaneSum(Vec<float> v) {
  typedef float Half __attribute__((vector_size(32)));
  typedef float Quarter __attribute__((vector_size(16)));
  const Half h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Quarter q =
      __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  return (q[0] + q[2]) + (q[1] + q[3]);
}
[[gnu::always_inline]] inline double LaneSum(Vec<double> v) {
  typedef double Half __attribute__((vector_size(32)));
  const Half h =
      __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  return (h[0] + h[2]) + (h[1] + h[3]);
}

// The N sums over i in [0, c) of the terms that `add` accumulates: add(acc, i) adds element i's
// terms (or, called with vectors, those of elements i .. i + kLanes) into acc[0 .. N). add is a
// generic lambda that reads its inputs as At<W>(x, i) with W = Elem<decltype(acc)>, so the same
// code runs on vectors and on the row's last c mod kLanes values. Sums into out[0 .. N).
template <int N, typename T, typename Add>
[[gnu::always_inline]] inline void RowSums(int64_t c, Add add, T* out) {
  constexpr int64_t lanes = kLanes<T>;
  Vec<T> a[N], b[N];
  for (int k = 0; k < N; ++k) a[k] = b[k] = Vec<T>{};
  int64_t i = 0;
  for (; i + 2 * lanes <= c; i += 2 * lanes) {
    add(a, i);
    add(b, i + lanes);
  }
  if (i + lanes <= c) {
    add(a, i);
    i += lanes;
  }
  T tail[N] = {};
  for (; i < c; ++i) add(tail, i);
  for (int k = 0; k < N; ++k) out[k] = LaneSum(a[k] + b[k]) + tail[k];
}

}  // namespace spheret::nn::row
