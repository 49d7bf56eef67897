#include "worker/nn/attention_fused.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "worker/nn/attention_rows.h"
#include "worker/nn/attention_rows_avx512.h"
#include "worker/nn/attention_tiles.h"
#include "worker/nn/linear.h"
#include "worker/nn/parallel.h"

namespace spheret::nn {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Query rows (and key columns) per block: the products skip the blocks of P above the diagonal.
constexpr int64_t kBlock = 64;

// The Fortran BLAS gemm with 32-bit integers (LP64, as LibTorch calls its own BLAS): column-major
// C = alpha op(A) op(B) + beta C.
template <typename T>
using FortranGemm = void (*)(const char*, const char*, const int*, const int*, const int*, const T*,
                             const T*, const int*, const T*, const int*, const T*, T*, const int*);

// sgemm_ and dgemm_ from the libraries already loaded (LibTorch's MKL, or the BLAS a LibTorch
// build links); null where there is none, and then the attention is not fused.
struct Blas {
  FortranGemm<float> s = nullptr;
  FortranGemm<double> d = nullptr;
};

const Blas& LoadedBlas() {
  static const Blas blas = [] {
    Blas found;
    found.s = reinterpret_cast<FortranGemm<float>>(dlsym(RTLD_DEFAULT, "sgemm_"));
    found.d = reinterpret_cast<FortranGemm<double>>(dlsym(RTLD_DEFAULT, "dgemm_"));
    return found;
  }();
  return blas;
}

template <typename T>
FortranGemm<T> GemmOf();
template <>
FortranGemm<float> GemmOf<float>() {
  return LoadedBlas().s;
}
template <>
FortranGemm<double> GemmOf<double>() {
  return LoadedBlas().d;
}

// Row-major C (m x n, row stride ldc) = alpha op(A) op(B) + beta C, op(A) m x k and op(B) k x n;
// A is stored m x k (k x m when trans_a), B k x n (n x k when trans_b), with row strides lda, ldb.
// A row-major matrix is its transpose in column-major, so BLAS computes C^T = op(B)^T op(A)^T.
template <typename T>
void GemmRows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
              int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const char ta = trans_b ? 'T' : 'N', tb = trans_a ? 'T' : 'N';
  const int mi = static_cast<int>(n), ni = static_cast<int>(m), ki = static_cast<int>(k);
  const int la = static_cast<int>(ldb), lb = static_cast<int>(lda), lc = static_cast<int>(ldc);
  GemmOf<T>()(&ta, &tb, &mi, &ni, &ki, &alpha, b, &la, a, &lb, &beta, c, &lc);
}

// Each row loop is built twice, for AVX2 with FMA (this file compiles with -ffp-contract=fast) and
// for baseline x86-64, and called through the one the CPU runs; the fp32 softmax rows also for
// AVX-512 (attention_rows_avx512.h), which goes first where the CPU has it.
bool Avx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
bool Avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

#define SPHERET_ROW_LOOP(name, params, args)                  \
  template <typename T>                                       \
  __attribute__((target("avx2,fma"))) void name##Fma params { \
    attention_rows::name##Body args;                          \
  }                                                           \
  template <typename T>                                       \
  void name##Base params {                                    \
    attention_rows::name##Body args;                          \
  }                                                           \
  template <typename T>                                       \
  void name params {                                          \
    Avx2Fma() ? name##Fma<T> args : name##Base<T> args;       \
  }

SPHERET_ROW_LOOP(SoftmaxRows, (T * e, int64_t t, int64_t r0, int64_t r1, T* inv),
                 (e, t, r0, r1, inv))
SPHERET_ROW_LOOP(SoftmaxBackwardRows,
                 (const T* e, const T* inv, T* ds, int64_t t, int64_t r0, int64_t r1, T scale),
                 (e, inv, ds, t, r0, r1, scale))
SPHERET_ROW_LOOP(ScaleRows, (T * x, int64_t ld, int64_t r0, int64_t r1, int64_t n, const T* by),
                 (x, ld, r0, r1, n, by))
#undef SPHERET_ROW_LOOP

__attribute__((target("avx512f"))) void SoftmaxRowsAvx512(float* e, int64_t t, int64_t r0,
                                                          int64_t r1, float* inv) {
  attention_rows::SoftmaxRowsAvx512Body(e, t, r0, r1, inv);
}
__attribute__((target("avx512f"))) void SoftmaxBackwardRowsAvx512(const float* e, const float* inv,
                                                                  float* ds, int64_t t, int64_t r0,
                                                                  int64_t r1, float scale) {
  attention_rows::SoftmaxBackwardRowsAvx512Body(e, inv, ds, t, r0, r1, scale);
}

// The softmax rows through the fastest build the CPU runs.
template <typename T>
void SoftmaxRowsFastest(T* e, int64_t t, int64_t r0, int64_t r1, T* inv) {
  if constexpr (std::is_same_v<T, float>) {
    if (Avx512()) return SoftmaxRowsAvx512(e, t, r0, r1, inv);
  }
  SoftmaxRows(e, t, r0, r1, inv);
}
template <typename T>
void SoftmaxBackwardRowsFastest(const T* e, const T* inv, T* ds, int64_t t, int64_t r0, int64_t r1,
                                T scale) {
  if constexpr (std::is_same_v<T, float>) {
    if (Avx512()) return SoftmaxBackwardRowsAvx512(e, inv, ds, t, r0, r1, scale);
  }
  SoftmaxBackwardRows(e, inv, ds, t, r0, r1, scale);
}

// One call's shapes: qkv (B, T, 3C), y and its gradient (B, T, C), E (B, nh, T, T), inv (B, nh, T).
struct Shape {
  int64_t t, c, n_head, hs;
};

// Head (b, h): E's row blocks, inv, and y = inv (E v).
template <typename T>
void ForwardHead(const Shape& s, const T* qkv, int64_t b, int64_t h, T scale, T* e, T* inv, T* y) {
  const int64_t ld3 = 3 * s.c, head = b * s.n_head + h;
  const T* q = qkv + b * s.t * ld3 + h * s.hs;
  const T *k = q + s.c, *v = q + 2 * s.c;
  T* eh = e + head * s.t * s.t;
  T* ih = inv + head * s.t;
  T* yh = y + b * s.t * s.c + h * s.hs;
  for (int64_t r0 = 0; r0 < s.t; r0 += kBlock) {
    const int64_t r1 = std::min(s.t, r0 + kBlock);
    // Logits of query rows [r0, r1) against keys [0, r1): scale q k^T.
    GemmRows<T>(false, true, r1 - r0, r1, s.hs, scale, q + r0 * ld3, ld3, k, ld3, T(0),
                eh + r0 * s.t, s.t);
    SoftmaxRowsFastest(eh, s.t, r0, r1, ih);
    GemmRows<T>(false, false, r1 - r0, s.hs, r1, T(1), eh + r0 * s.t, s.t, v, ld3, T(0),
                yh + r0 * s.c, s.c);
    ScaleRows(yh, s.c, r0, r1, s.hs, ih);
  }
}

// Head (b, h)'s gradients dq, dk, dv inside dqkv; ds: t * t scratch, gys: t * hs scratch.
template <typename T>
void BackwardHead(const Shape& s, const T* qkv, const T* e, const T* inv, const T* gy, int64_t b,
                  int64_t h, T scale, T* ds, T* gys, T* dqkv) {
  const int64_t ld3 = 3 * s.c, head = b * s.n_head + h;
  const int64_t at3 = b * s.t * ld3 + h * s.hs;
  const T* q = qkv + at3;
  const T *k = q + s.c, *v = q + 2 * s.c;
  T* dq = dqkv + at3;
  T *dk = dq + s.c, *dv = dq + 2 * s.c;
  const T* eh = e + head * s.t * s.t;
  const T* ih = inv + head * s.t;
  const T* dy = gy + b * s.t * s.c + h * s.hs;
  for (int64_t r0 = 0; r0 < s.t; r0 += kBlock) {
    const int64_t r1 = std::min(s.t, r0 + kBlock);
    // dP = dy v^T at query rows [r0, r1), keys [0, r1); then dS; then dq = dS k.
    GemmRows<T>(false, true, r1 - r0, r1, s.hs, T(1), dy + r0 * s.c, s.c, v, ld3, T(0),
                ds + r0 * s.t, s.t);
    SoftmaxBackwardRowsFastest(eh, ih, ds, s.t, r0, r1, scale);
    GemmRows<T>(false, false, r1 - r0, s.hs, r1, T(1), ds + r0 * s.t, s.t, k, ld3, T(0),
                dq + r0 * ld3, ld3);
  }
  // gys = inv dy, so that P^T dy = E^T gys.
  for (int64_t r = 0; r < s.t; ++r) {
    for (int64_t j = 0; j < s.hs; ++j) gys[r * s.hs + j] = dy[r * s.c + j] * ih[r];
  }
  for (int64_t j0 = 0; j0 < s.t; j0 += kBlock) {
    const int64_t j1 = std::min(s.t, j0 + kBlock);
    // Keys [j0, j1) are seen by query rows [j0, t): dv = E^T gys and dk = dS^T q over those rows.
    GemmRows<T>(true, false, j1 - j0, s.hs, s.t - j0, T(1), eh + j0 * s.t + j0, s.t,
                gys + j0 * s.hs, s.hs, T(0), dv + j0 * ld3, ld3);
    GemmRows<T>(true, false, j1 - j0, s.hs, s.t - j0, T(1), ds + j0 * s.t + j0, s.t, q + j0 * ld3,
                ld3, T(0), dk + j0 * ld3, ld3);
  }
}

// Whether the heads take the register tiles: fp32 heads that attention_tiles Takes(), where the
// process's products are not MKL's (the tiles ran no faster than MKL's sgemm_ on an Intel CPU, and
// faster than its generic path on an AMD EPYC: docs/performance.md).
bool TilesTake(const Shape& s, CpuGemm gemm) {
  return gemm == CpuGemm::kOneDnn && attention_tiles::Takes(s.hs);
}

// Every head through attention_tiles where TilesTake (fp32; false, nothing done, elsewhere):
// head i = b * n_head + h at the same places as ForwardHead's and BackwardHead's.
bool ForwardAllTiles(const Shape& s, CpuGemm gemm, int64_t heads, const float* qkv, float scale,
                     float* e, float* inv, float* y) {
  if (!TilesTake(s, gemm)) return false;
  ParallelFor(0, heads, 1, [&](int64_t first, int64_t last) {
    std::vector<float> scratch(attention_tiles::ForwardScratch(s.t, s.hs));
    for (int64_t i = first; i < last; ++i) {
      const int64_t b = i / s.n_head, h = i % s.n_head;
      const float* q = qkv + b * s.t * 3 * s.c + h * s.hs;
      attention_tiles::ForwardHead(q, q + s.c, q + 2 * s.c, 3 * s.c, s.t, s.hs, scale,
                                   e + i * s.t * s.t, inv + i * s.t, y + b * s.t * s.c + h * s.hs,
                                   s.c, scratch.data());
    }
  });
  return true;
}
bool ForwardAllTiles(const Shape&, CpuGemm, int64_t, const double*, double, double*, double*,
                     double*) {
  return false;
}

bool BackwardAllTiles(const Shape& s, CpuGemm gemm, int64_t heads, const float* qkv, const float* e,
                      const float* inv, const float* gy, float scale, float* dqkv) {
  if (!TilesTake(s, gemm)) return false;
  ParallelFor(0, heads, 1, [&](int64_t first, int64_t last) {
    std::vector<float> scratch(attention_tiles::BackwardScratch(s.t, s.hs));
    for (int64_t i = first; i < last; ++i) {
      const int64_t b = i / s.n_head, h = i % s.n_head, at3 = b * s.t * 3 * s.c + h * s.hs;
      const float* q = qkv + at3;
      float* dq = dqkv + at3;
      attention_tiles::BackwardHead(q, q + s.c, q + 2 * s.c, 3 * s.c, e + i * s.t * s.t,
                                    inv + i * s.t, gy + b * s.t * s.c + h * s.hs, s.c, s.t, s.hs,
                                    scale, dq, dq + s.c, dq + 2 * s.c, scratch.data());
    }
  });
  return true;
}
bool BackwardAllTiles(const Shape&, CpuGemm, int64_t, const double*, const double*, const double*,
                      const double*, double, double*) {
  return false;
}

Shape ShapeOf(const Tensor& qkv, int64_t n_head) {
  const int64_t c = qkv.size(2) / 3;
  return {qkv.size(1), c, n_head, c / n_head};
}

class CausalAttentionFunction : public torch::autograd::Function<CausalAttentionFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& qkv, int64_t n_head, CpuGemm gemm) {
    const Shape s = ShapeOf(qkv, n_head);
    const int64_t batch = qkv.size(0), heads = batch * n_head;
    Tensor y = torch::empty({batch, s.t, s.c}, qkv.options());
    // E: only the blocks on and below the diagonal are written, and only they are read.
    Tensor e = torch::empty({batch, n_head, s.t, s.t}, qkv.options());
    Tensor inv = torch::empty({batch, n_head, s.t}, qkv.options());
    AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "causal_attention_forward", [&] {
      const scalar_t scale = scalar_t(1) / std::sqrt(static_cast<scalar_t>(s.hs));
      const scalar_t* in = qkv.data_ptr<scalar_t>();
      scalar_t *ep = e.data_ptr<scalar_t>(), *ip = inv.data_ptr<scalar_t>();
      scalar_t* out = y.data_ptr<scalar_t>();
      if (ForwardAllTiles(s, gemm, heads, in, scale, ep, ip, out)) return;
      ParallelFor(0, heads, 1, [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) {
          ForwardHead(s, in, i / n_head, i % n_head, scale, ep, ip, out);
        }
      });
    });
    ctx->save_for_backward({qkv, e, inv});
    ctx->saved_data["n_head"] = n_head;
    ctx->saved_data["onednn"] = gemm == CpuGemm::kOneDnn;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &qkv = saved[0], &e = saved[1], &inv = saved[2];
    const int64_t n_head = ctx->saved_data["n_head"].toInt();
    const CpuGemm gemm = ctx->saved_data["onednn"].toBool() ? CpuGemm::kOneDnn : CpuGemm::kMkl;
    const Shape s = ShapeOf(qkv, n_head);
    const int64_t heads = qkv.size(0) * n_head;
    const Tensor gy = grads[0].contiguous();
    Tensor dqkv = torch::empty_like(qkv);  // every element written once
    AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "causal_attention_backward", [&] {
      const scalar_t scale = scalar_t(1) / std::sqrt(static_cast<scalar_t>(s.hs));
      const scalar_t *in = qkv.data_ptr<scalar_t>(), *ep = e.data_ptr<scalar_t>();
      const scalar_t *ip = inv.data_ptr<scalar_t>(), *g = gy.data_ptr<scalar_t>();
      scalar_t* out = dqkv.data_ptr<scalar_t>();
      if (BackwardAllTiles(s, gemm, heads, in, ep, ip, g, scale, out)) return;
      ParallelFor(0, heads, 1, [&](int64_t first, int64_t last) {
        std::vector<scalar_t> ds(static_cast<size_t>(s.t * s.t));
        std::vector<scalar_t> gys(static_cast<size_t>(s.t * s.hs));
        for (int64_t i = first; i < last; ++i) {
          BackwardHead(s, in, ep, ip, g, i / n_head, i % n_head, scale, ds.data(), gys.data(), out);
        }
      });
    });
    return {dqkv, Tensor(), Tensor()};
  }
};

}  // namespace

bool AttentionFusable(const Tensor& qkv, int64_t n_head) {
  if (!qkv.defined() || !qkv.device().is_cpu() || qkv.dim() != 3 || !qkv.is_contiguous()) {
    return false;
  }
  const bool fp32 = qkv.scalar_type() == torch::kFloat;
  if (!fp32 && qkv.scalar_type() != torch::kDouble) return false;
  const int64_t t = qkv.size(1), c3 = qkv.size(2);
  if (t < 1 || t > kFusedAttentionMaxT || c3 % 3 != 0 || c3 > INT_MAX || n_head < 1 ||
      (c3 / 3) % n_head != 0) {
    return false;
  }
  return fp32 ? LoadedBlas().s != nullptr : LoadedBlas().d != nullptr;
}

Tensor CausalAttentionFused(const Tensor& qkv, int64_t n_head, CpuGemm gemm) {
  TORCH_CHECK(AttentionFusable(qkv, n_head), "CausalAttentionFused: qkv of shape ", qkv.sizes(),
              " and dtype ", qkv.scalar_type(), " on ", qkv.device(), " with n_head ", n_head,
              " is not fusable (AttentionFusable)");
  return CausalAttentionFunction::apply(qkv, n_head, gemm);
}

}  // namespace spheret::nn
