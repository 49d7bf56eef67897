// attention_tiles.h: one head of the causal attention in AVX-512 register tiles. This file compiles
// with -mavx512f (worker/nn/CMakeLists.txt) and runs only where Takes() saw the CPU's AVX-512, so
// it keeps to its own functions (an anonymous namespace) and always-inlined helpers: no library
// template is instantiated here that another file could link in its place.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "worker/nn/attention_rows_avx512.h"
#include "worker/nn/attention_tiles.h"

namespace spheret::nn::attention_tiles {
namespace {

using attention_rows::FirstLanes;

constexpr int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
constexpr int64_t Up16(int64_t n) { return (n + 15) / 16 * 16; }

// The products against packed keys (logits, dP) take up to kRowsWide rows by kVecsWide vectors of
// 16 keys; the ones with hs columns (y, dq, dk, dv) up to RowsFor(NV) rows by NV vectors. Either
// way a tile holds at most 24 accumulators of the 32 registers.
constexpr int kRowsWide = 4, kVecsWide = 4;
constexpr int RowsFor(int nv) { return nv <= 2 ? 12 : 24 / nv; }

// acc (M x NV vectors) = the sum over k < kn of a(i, k) b(k, :), with a(i, k) = a[i * ai + k * ak]
// and b's row k the NV * 16 values at b + k * ldb.
template <int M, int NV>
inline __attribute__((always_inline)) void Product(const float* a, int64_t ai, int64_t ak,
                                                   const float* b, int64_t ldb, int64_t kn,
                                                   __m512 (&acc)[M][NV]) {
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kn; ++k) {
    const float* bk = b + k * ldb;
    const float* ak_col = a + k * ak;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(bk + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_set1_ps(ak_col[i * ai]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
}

// Row i of acc times row_factor[i] (factor where row_factor is null) to c + i * ldc, its first n
// columns.
template <int M, int NV>
inline __attribute__((always_inline)) void Store(const __m512 (&acc)[M][NV], float factor,
                                                 const float* row_factor, float* c, int64_t ldc,
                                                 int64_t n) {
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    const __m512 f = _mm512_set1_ps(row_factor != nullptr ? row_factor[i] : factor);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      _mm512_mask_storeu_ps(c + i * ldc + 16 * v, FirstLanes(n - 16 * v),
                            _mm512_mul_ps(acc[i][v], f));
    }
  }
}

// f(std::integral_constant<int, m>()) for 1 <= m <= Max: the tile's size as a constant.
template <int Max, typename F>
inline __attribute__((always_inline)) void WithSize(int64_t m, F&& f) {
  if constexpr (Max > 1) {
    if (m < Max) return WithSize<Max - 1>(m, f);
  }
  f(std::integral_constant<int, Max>());
}

// c (m rows, row stride ldc, first n columns) = factor a bt: the m rows of a (row stride lda, hs
// values each) against bt (hs x tp: keys along a row, zero past the last), n <= tp.
void RowsTimesPacked(const float* a, int64_t lda, int64_t m, const float* bt, int64_t tp,
                     int64_t hs, int64_t n, float factor, float* c, int64_t ldc) {
  const int64_t vecs = (n + 15) / 16;
  WithSize<kRowsWide>(m, [&](auto rows) {
    constexpr int M = decltype(rows)::value;
    for (int64_t g = 0; g < vecs; g += kVecsWide) {
      WithSize<kVecsWide>(Min(kVecsWide, vecs - g), [&](auto width) {
        constexpr int NV = decltype(width)::value;
        __m512 acc[M][NV];
        Product<M, NV>(a, lda, 1, bt + 16 * g, tp, hs, acc);
        Store<M, NV>(acc, factor, nullptr, c + 16 * g, ldc, n - 16 * g);
      });
    }
  });
}

// c (m rows of 16 NV, row stride ldc) = the sum over k < kn of a(i, k) b's row k (row stride ldb),
// a(i, k) = a[i * ai + k * ak], each row times row_factor[i] where given.
template <int NV>
void TimesRows(const float* a, int64_t ai, int64_t ak, int64_t m, const float* b, int64_t ldb,
               int64_t kn, const float* row_factor, float* c, int64_t ldc) {
  WithSize<RowsFor(NV)>(m, [&](auto rows) {
    constexpr int M = decltype(rows)::value;
    __m512 acc[M][NV];
    Product<M, NV>(a, ai, ak, b, ldb, kn, acc);
    Store<M, NV>(acc, 1.0f, row_factor, c, ldc, 16 * NV);
  });
}

// dst (hs x tp, row stride tp) = src^T for src's t rows (row stride lds) of hs values; zeros in
// columns [t, tp).
void PackTransposed(const float* src, int64_t lds, int64_t t, int64_t hs, float* dst, int64_t tp) {
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(lds)));
  for (int64_t j = 0; j < tp; j += 16) {
    const __mmask16 live = FirstLanes(t - j);
    const float* from = src + j * lds;
    for (int64_t d = 0; d < hs; ++d) {
      _mm512_storeu_ps(dst + d * tp + j,
                       _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, rows, from + d, 4));
    }
  }
}

// The width of E's and dS's stored rows in the row tile that ends at row `end`: the keys computed
// (the tile's last diagonal rounded up to 16) and 16 more, as zeros, within t; so row r holds at
// least keys [0, r + 17). The products of hs columns read row r at keys below r + 12 (their tiles
// have at most 12 rows): y's and dq's, the keys of their row tile; dk's and dv's, the rows from
// their key tile's first key on.
int64_t StoredWidth(int64_t end, int64_t t) { return Min(t, Up16(end) + 16); }

template <int NV>
void ForwardHeadOf(const float* q, const float* k, const float* v, int64_t ld, int64_t t,
                   float scale, float* e, float* inv, float* y, int64_t ldy, float* scratch) {
  constexpr int64_t hs = 16 * NV;
  const int64_t tp = Up16(t);
  float* kt = scratch;
  PackTransposed(k, ld, t, hs, kt, tp);
  // Row tiles of y: their logits and softmax rows, kRowsWide rows at a time, then y's tile while
  // those rows of E are still in L1.
  constexpr int kRows = RowsFor(NV);
  for (int64_t r0 = 0; r0 < t; r0 += kRows) {
    const int64_t m = Min(kRows, t - r0);
    for (int64_t s0 = r0; s0 < r0 + m; s0 += kRowsWide) {
      const int64_t end = Min(s0 + kRowsWide, r0 + m);
      // Logits of rows [s0, end) against the keys they see, to a whole vector (the softmax zeros
      // what lies past each row's diagonal).
      RowsTimesPacked(q + s0 * ld, ld, end - s0, kt, tp, hs, Min(t, Up16(end)), scale, e + s0 * t,
                      t);
      const int64_t width = StoredWidth(end, t);
      for (int64_t r = s0; r < end; ++r) {
        inv[r] = attention_rows::SoftmaxRow16(e + r * t, r + 1, width);
      }
    }
    TimesRows<NV>(e + r0 * t, t, 1, m, v, ld, r0 + m, inv + r0, y + r0 * ldy, ldy);
  }
}

template <int NV>
void BackwardHeadOf(const float* q, const float* k, const float* v, int64_t ld, const float* e,
                    const float* inv, const float* dy, int64_t ldy, int64_t t, float scale,
                    float* dq, float* dk, float* dv, float* scratch) {
  constexpr int64_t hs = 16 * NV;
  const int64_t tp = Up16(t);
  float* vt = scratch;
  float* ds = vt + hs * tp;
  float* gys = ds + t * t;
  PackTransposed(v, ld, t, hs, vt, tp);
  // Row tiles of dq: their dP and dS rows, kRowsWide rows at a time, then dq = dS k over the keys
  // the tile sees, while those rows of dS are still in L1.
  constexpr int kRows = RowsFor(NV);
  for (int64_t r0 = 0; r0 < t; r0 += kRows) {
    const int64_t m = Min(kRows, t - r0);
    for (int64_t s0 = r0; s0 < r0 + m; s0 += kRowsWide) {
      const int64_t end = Min(s0 + kRowsWide, r0 + m);
      // dP = dy v^T, then dS in place.
      RowsTimesPacked(dy + s0 * ldy, ldy, end - s0, vt, tp, hs, Min(t, Up16(end)), 1.0f,
                      ds + s0 * t, t);
      const int64_t width = StoredWidth(end, t);
      for (int64_t r = s0; r < end; ++r) {
        attention_rows::SoftmaxBackwardRow16(e + r * t, inv[r], ds + r * t, r + 1, width, scale);
      }
    }
    TimesRows<NV>(ds + r0 * t, t, 1, m, k, ld, r0 + m, nullptr, dq + r0 * ld, ld);
  }
  // gys = inv dy, so that P^T dy = E^T gys.
  for (int64_t r = 0; r < t; ++r) {
    const __m512 f = _mm512_set1_ps(inv[r]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      _mm512_storeu_ps(gys + r * hs + 16 * v,
                       _mm512_mul_ps(_mm512_loadu_ps(dy + r * ldy + 16 * v), f));
    }
  }
  // Keys [j0, j0 + m) are seen by rows [j0, t): dk = dS^T q and dv = E^T gys over those rows.
  for (int64_t j0 = 0; j0 < t; j0 += kRows) {
    const int64_t m = Min(kRows, t - j0);
    TimesRows<NV>(ds + j0 * t + j0, 1, t, m, q + j0 * ld, ld, t - j0, nullptr, dk + j0 * ld, ld);
    TimesRows<NV>(e + j0 * t + j0, 1, t, m, gys + j0 * hs, hs, t - j0, nullptr, dv + j0 * ld, ld);
  }
}

// f(std::integral_constant<int, hs / 16>()) for hs 16, 32, 48, 64.
template <typename F>
void WithVectors(int64_t hs, F&& f) {
  switch (hs) {
    case 16:
      return f(std::integral_constant<int, 1>());
    case 32:
      return f(std::integral_constant<int, 2>());
    case 48:
      return f(std::integral_constant<int, 3>());
    default:
      return f(std::integral_constant<int, 4>());
  }
}

}  // namespace

void ForwardHead(const float* q, const float* k, const float* v, int64_t ld, int64_t t, int64_t hs,
                 float scale, float* e, float* inv, float* y, int64_t ldy, float* scratch) {
  WithVectors(hs, [&](auto vectors) {
    ForwardHeadOf<decltype(vectors)::value>(q, k, v, ld, t, scale, e, inv, y, ldy, scratch);
  });
}

void BackwardHead(const float* q, const float* k, const float* v, int64_t ld, const float* e,
                  const float* inv, const float* dy, int64_t ldy, int64_t t, int64_t hs,
                  float scale, float* dq, float* dk, float* dv, float* scratch) {
  WithVectors(hs, [&](auto vectors) {
    BackwardHeadOf<decltype(vectors)::value>(q, k, v, ld, e, inv, dy, ldy, t, scale, dq, dk, dv,
                                             scratch);
  });
}

}  // namespace spheret::nn::attention_tiles
