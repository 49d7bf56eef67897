#include "worker/nn/gelu_fused.h"

#include <immintrin.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "worker/nn/linear.h"
#include "worker/nn/parallel.h"

namespace spheret::nn {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per block: the unit of parallel work and of db's partial sums.
constexpr int64_t kRows = 64;

bool Avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

#define SPHERET_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) inline

SPHERET_AVX512_INLINE __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

// Phi(x) and x phi(x) on 16 lanes (see the header for the approximation).
SPHERET_AVX512_INLINE void CdfAndXPdf(__m512 x, __m512* cdf, __m512* x_pdf) {
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));  // x / sqrt 2
  const __m512 d = _mm512_fmadd_ps(_mm512_abs_ps(z), _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1));
  __m512 t = _mm512_rcp14_ps(d);                                    // 14 bits
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2)));  // one Newton step: 24
  __m512 poly = _mm512_set1_ps(1.061405429f);
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
  poly = _mm512_mul_ps(poly, t);
  // exp(-z^2) for -z^2 >= -87 (below, exp(-87) ~ 1.6e-38 stands for 0): -z^2 = n ln2 + r with
  // |r| <= ln2 / 2 (ln2 in two parts), exp(r) by its Taylor series to r^7, times 2^n (scalef).
  const __m512 w =
      _mm512_max_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), z), z), _mm512_set1_ps(-87));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(w, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), w);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 e = _mm512_set1_ps(1.0f / 5040);
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 720));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 120));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 24));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 6));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(0.5f));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1));
  e = _mm512_scalef_ps(e, n);
  // erfc(|z|) / 2; Phi(x) is that for x < 0 and 1 minus it for x >= 0.
  const __m512 half_erfc = _mm512_mul_ps(_mm512_mul_ps(poly, e), _mm512_set1_ps(0.5f));
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  *cdf = _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(1), half_erfc), half_erfc);
  *x_pdf = _mm512_mul_ps(_mm512_mul_ps(x, e), _mm512_set1_ps(0.39894228040143268f));  // 1/sqrt(2pi)
}

// x = a + b at the given lanes (zeros elsewhere), Phi(x) and x phi(x).
SPHERET_AVX512_INLINE void GeluTerms(const float* a, const float* b, __mmask16 lanes, __m512* x,
                                     __m512* cdf, __m512* x_pdf) {
  *x = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, a), _mm512_maskz_loadu_ps(lanes, b));
  CdfAndXPdf(*x, cdf, x_pdf);
}

// g = GELU(a + b) over rows [begin, end) of n values.
__attribute__((target("avx512f"))) void ForwardRows(const float* a, const float* b, float* g,
                                                    int64_t n, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 lanes = FirstLanes(n - j);
      __m512 x, cdf, x_pdf;
      GeluTerms(a + i * n + j, b + j, lanes, &x, &cdf, &x_pdf);
      _mm512_mask_storeu_ps(g + i * n + j, lanes, _mm512_mul_ps(x, cdf));
    }
  }
}

// da = dg GELU'(a + b) over rows [begin, end), and db_part (n) their sum over those rows.
__attribute__((target("avx512f"))) void BackwardRows(const float* a, const float* b,
                                                     const float* dg, float* da, float* db_part,
                                                     int64_t n, int64_t begin, int64_t end) {
  for (int64_t j = 0; j < n; ++j) db_part[j] = 0;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 lanes = FirstLanes(n - j);
      __m512 x, cdf, x_pdf;
      GeluTerms(a + i * n + j, b + j, lanes, &x, &cdf, &x_pdf);
      const __m512 d =
          _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, dg + i * n + j), _mm512_add_ps(cdf, x_pdf));
      _mm512_mask_storeu_ps(da + i * n + j, lanes, d);
      _mm512_mask_storeu_ps(db_part + j, lanes,
                            _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, db_part + j), d));
    }
  }
}

#undef SPHERET_AVX512_INLINE

// g = GELU(a + b) for a (rows, n) and b (n), a new tensor shaped like a.
Tensor GeluForward(const Tensor& a, const Tensor& b) {
  const int64_t n = b.size(0), rows = a.numel() / n;
  Tensor g = torch::empty_like(a);
  const float *ap = a.data_ptr<float>(), *bp = b.data_ptr<float>();
  float* gp = g.data_ptr<float>();
  ParallelFor(0, rows, kRows,
              [&](int64_t begin, int64_t end) { ForwardRows(ap, bp, gp, n, begin, end); });
  return g;
}

// da = dg GELU'(a + b) into da (shaped like a; it may be a itself: each value of a is read before
// its place is written), and returns db, da summed over the rows.
Tensor GeluBackward(const Tensor& a, const Tensor& b, const Tensor& dg, const Tensor& da) {
  const int64_t n = b.size(0), rows = a.numel() / n, blocks = (rows + kRows - 1) / kRows;
  if (blocks == 0) return torch::zeros_like(b);
  Tensor parts = torch::empty({blocks, n}, b.options());
  const float *ap = a.data_ptr<float>(), *bp = b.data_ptr<float>(), *gp = dg.data_ptr<float>();
  float *dap = da.data_ptr<float>(), *pp = parts.data_ptr<float>();
  ParallelFor(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      BackwardRows(ap, bp, gp, dap, pp + k * n, n, k * kRows, std::min(rows, (k + 1) * kRows));
    }
  });
  // The blocks' partial sums in block order, the same at any thread count.
  Tensor db = parts[0].clone();
  float* dbp = db.data_ptr<float>();
  for (int64_t k = 1; k < blocks; ++k) {
    for (int64_t j = 0; j < n; ++j) dbp[j] += pp[k * n + j];
  }
  return db;
}

class BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    ctx->save_for_backward({a, b});
    return GeluForward(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &a = saved[0], &b = saved[1];
    Tensor da = torch::empty_like(a);
    Tensor db = GeluBackward(a, b, grads[0].contiguous(), da);
    return {da, db};
  }
};

// GELU(x w^T + b): the product made here, into a buffer of this function's own, which the backward
// overwrites with da unless the graph is kept for another backward.
class LinearGeluFunction : public torch::autograd::Function<LinearGeluFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b) {
    const Tensor a = Mm(x.reshape({-1, x.size(-1)}), w.t());  // (rows, N)
    ctx->save_for_backward({x, w, b, a});
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(0);
    return GeluForward(a, b).view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &w = saved[1], &b = saved[2], &a = saved[3];
    const Tensor dg = grads[0].contiguous();
    // a is read by nothing else: with the graph freed after this backward, da takes its place
    // (no (rows, N) tensor to allocate and fill); with the graph kept, a stays for the next one.
    const Tensor da =
        torch::autograd::get_current_graph_task_keep_graph() ? torch::empty_like(a) : a;
    Tensor db = GeluBackward(a, b, dg, da);
    Tensor dx = ctx->needs_input_grad(0) ? Mm(da, w).view(x.sizes()) : Tensor();
    Tensor dw = ctx->needs_input_grad(1) ? Mm(da.t(), x.reshape({-1, x.size(-1)})) : Tensor();
    return {dx, dw, db};
  }
};

// b a contiguous CPU fp32 vector of n > 0 values, on a CPU with AVX-512.
bool BiasFusable(const Tensor& b, int64_t n) {
  return b.defined() && b.device().is_cpu() && b.scalar_type() == torch::kFloat && b.dim() == 1 &&
         b.size(0) == n && n > 0 && b.is_contiguous() && Avx512();
}

}  // namespace

bool BiasGeluFusable(const Tensor& a, const Tensor& b) {
  return a.defined() && a.device().is_cpu() && a.scalar_type() == torch::kFloat && a.dim() >= 1 &&
         a.is_contiguous() && BiasFusable(b, a.size(-1));
}

Tensor BiasGelu(const Tensor& a, const Tensor& b) {
  if (!BiasGeluFusable(a, b)) return torch::gelu(a + b);
  return BiasGeluFunction::apply(a, b);
}

bool LinearGeluFusable(const Tensor& x, const Tensor& w, const Tensor& b) {
  return x.defined() && w.defined() && x.device().is_cpu() && w.device().is_cpu() &&
         x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat && x.dim() >= 1 &&
         w.dim() == 2 && x.size(-1) == w.size(1) && x.is_contiguous() && w.is_contiguous() &&
         BiasFusable(b, w.size(0));
}

Tensor LinearGelu(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (!LinearGeluFusable(x, w, b)) return torch::gelu(torch::linear(x, w, b));
  return LinearGeluFunction::apply(x, w, b);
}

}  // namespace spheret::nn
