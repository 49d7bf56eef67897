#include "worker/nn/norm_fused.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "worker/nn/layer_norm_rows.h"
#include "worker/nn/parallel.h"
#include "worker/nn/sphere_fused.h"
#include "worker/nn/sphere_rows.h"

namespace spheret::nn {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per block: the unit of parallel work and of the weight/bias gradient's partial sums.
constexpr int64_t kNormBlockRows = 32;

int64_t NormBlocks(int64_t rows) { return (rows + kNormBlockRows - 1) / kNormBlockRows; }

// The sphere update's forward state of each row (row::RowState), kept as kStateWords values of the
// compute dtype per row in a tensor the autograd context saves.
constexpr int64_t kStateWords = sizeof(row::RowState<float>) / sizeof(float);
static_assert(sizeof(row::RowState<double>) == kStateWords * sizeof(double));

template <typename T>
row::RowState<T>* StatesOf(const Tensor& state) {
  return reinterpret_cast<row::RowState<T>*>(state.data_ptr<T>());
}

// The inputs of one fused call as raw rows: h, f (rows, c), the update, the LayerNorm.
template <typename T>
struct FusedRows {
  const T* h;
  const T* f;
  bool sphere;  // the sphere update (else h + f)
  T alpha;
  row::Rule rule;
  const T* w;
  const T* b;  // null without bias
  T eps;
  int64_t c;
};

// alpha is read only for the sphere update; b is empty without bias.
template <typename T>
FusedRows<T> RowsOf(const Tensor& h, const Tensor& f, bool sphere, const Tensor& alpha,
                    const row::Rule& rule, const Tensor& w, const Tensor& b, double eps) {
  return {h.data_ptr<T>(),
          f.data_ptr<T>(),
          sphere,
          sphere ? alpha.item<T>() : T(0),
          rule,
          w.data_ptr<T>(),
          b.numel() > 0 ? b.data_ptr<T>() : nullptr,
          static_cast<T>(eps),
          h.size(1)};
}

// Rows [begin, end): out = update(h, f), normed = LN(out), and each row's mean and rstd; for the
// sphere update, each row's forward state too.
template <typename T>
SPHERET_SIMD_CLONES void ForwardNormBlock(const FusedRows<T>& in, int64_t begin, int64_t end,
                                          T* out, T* normed, T* mean, T* rstd,
                                          row::RowState<T>* state) {
  const int64_t c = in.c;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r * c;
    if (in.sphere) {
      row::SphereForwardRow(in.h + o, in.f + o, in.alpha, in.rule, c, out + o, state + r);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) out[o + i] = in.h[o + i] + in.f[o + i];
    }
    const row::NormStats<T> s = row::LayerNormRow(out + o, in.w, in.b, in.eps, c, normed + o);
    mean[r] = s.mean;
    rstd[r] = s.rstd;
  }
}

// The gradients of a forward, saved tensors as raw rows.
template <typename T>
struct GradRows {
  const T* g_out;  // null when h' got no gradient of its own
  const T* g_norm;
  const T* out;
  const T* mean;
  const T* rstd;
  const row::RowState<T>* state;  // the sphere update's, else null
};

// Rows [begin, end) of the backward: the total gradient of h' (its own plus the LayerNorm's), then
// the update's backward. dw, db (db may be null) receive the block's sums; g_alpha one per row.
template <typename T>
SPHERET_SIMD_CLONES void BackwardNormBlock(const FusedRows<T>& in, const GradRows<T>& g,
                                           int64_t begin, int64_t end, T* dh, T* df, T* g_alpha,
                                           T* dw, T* db, T* scratch) {
  const int64_t c = in.c;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r * c;
    T* total = in.sphere ? scratch : dh + o;  // d loss / d h'
    if (g.g_out != nullptr) {
      std::copy(g.g_out + o, g.g_out + o + c, total);
    } else {
      std::fill(total, total + c, T(0));
    }
    row::LayerNormBackwardRow(g.g_norm + o, g.out + o, row::NormStats<T>{g.mean[r], g.rstd[r]},
                              in.w, c, total, dw, db);
    if (in.sphere) {
      g_alpha[r] = row::SphereBackwardRow(total, in.h + o, in.f + o, in.alpha, g.state[r], c,
                                          dh + o, df + o);
    }
  }
}

// Sums the blocks' partial gradients (blocks, 2, c) in block order into w's and b's gradients.
template <typename T>
void SumPartials(const T* partial, int64_t blocks, int64_t c, T* dw, T* db) {
  for (int64_t k = 0; k < blocks; ++k) {
    const T* block = partial + k * 2 * c;
    for (int64_t i = 0; i < c; ++i) dw[i] += block[i];
    if (db != nullptr) {
      for (int64_t i = 0; i < c; ++i) db[i] += block[c + i];
    }
  }
}

// Inputs: contiguous (rows, C) h and f, one CPU dtype; alpha 0-dim (read for the sphere update
// only); bias (C) or empty (no bias). Every input is defined: autograd records each one's device.
class UpdateNormFunction : public torch::autograd::Function<UpdateNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& h, const Tensor& f,
                               const Tensor& alpha, const Tensor& weight, const Tensor& bias,
                               bool sphere, double p, bool exp_map, double cap, double eps) {
    ctx->set_materialize_grads(false);
    const int64_t rows = h.size(0);
    Tensor out = torch::empty_like(h), normed = torch::empty_like(h);
    Tensor mean = torch::empty({rows}, h.options()), rstd = torch::empty({rows}, h.options());
    Tensor state = torch::empty({sphere ? rows * kStateWords : 0}, h.options());
    const row::Rule rule = row::MakeRule(p, exp_map, cap);
    AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "update_norm_forward", [&] {
      const FusedRows<scalar_t> in = RowsOf<scalar_t>(h, f, sphere, alpha, rule, weight, bias, eps);
      scalar_t *o = out.data_ptr<scalar_t>(), *n = normed.data_ptr<scalar_t>();
      scalar_t *m = mean.data_ptr<scalar_t>(), *s = rstd.data_ptr<scalar_t>();
      row::RowState<scalar_t>* st = sphere ? StatesOf<scalar_t>(state) : nullptr;
      ParallelFor(0, NormBlocks(rows), 1, [&](int64_t first, int64_t last) {
        for (int64_t k = first; k < last; ++k) {
          ForwardNormBlock(in, k * kNormBlockRows, std::min(rows, (k + 1) * kNormBlockRows), o, n,
                           m, s, st);
        }
      });
    });
    ctx->save_for_backward({h, f, alpha, weight, bias, out, mean, rstd, state});
    ctx->saved_data["rule"] = std::vector<double>{p, exp_map ? 1.0 : 0.0, cap, eps};
    ctx->saved_data["sphere"] = sphere;
    return {out, normed};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &h = saved[0], &f = saved[1], &alpha = saved[2], &weight = saved[3];
    const Tensor &bias = saved[4], &out = saved[5], &mean = saved[6], &rstd = saved[7];
    const Tensor& state = saved[8];
    const std::vector<double> knobs = ctx->saved_data["rule"].toDoubleVector();
    const row::Rule rule = row::MakeRule(knobs[0], knobs[1] != 0.0, knobs[2]);
    const Tensor g_out = grads[0].defined() ? grads[0].contiguous() : Tensor();
    if (!g_out.defined() && !grads[1].defined()) return variable_list(10);
    const Tensor g_norm = grads[1].defined() ? grads[1].contiguous() : torch::zeros_like(out);
    const bool sphere = ctx->saved_data["sphere"].toBool(), with_bias = bias.numel() > 0;
    const int64_t rows = h.size(0), c = h.size(1), blocks = NormBlocks(rows);
    Tensor dh = torch::empty_like(h), df = sphere ? torch::empty_like(f) : dh;
    Tensor g_alpha = torch::empty({sphere ? rows : 0}, h.options());
    Tensor partial = torch::zeros({blocks, 2, c}, h.options());
    Tensor dw = torch::zeros_like(weight), db = with_bias ? torch::zeros_like(bias) : Tensor();
    AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "update_norm_backward", [&] {
      const FusedRows<scalar_t> in =
          RowsOf<scalar_t>(h, f, sphere, alpha, rule, weight, bias, knobs[3]);
      const GradRows<scalar_t> g{g_out.defined() ? g_out.data_ptr<scalar_t>() : nullptr,
                                 g_norm.data_ptr<scalar_t>(),
                                 out.data_ptr<scalar_t>(),
                                 mean.data_ptr<scalar_t>(),
                                 rstd.data_ptr<scalar_t>(),
                                 sphere ? StatesOf<scalar_t>(state) : nullptr};
      scalar_t* sums = partial.data_ptr<scalar_t>();
      ParallelFor(0, blocks, 1, [&](int64_t first, int64_t last) {
        std::vector<scalar_t> scratch(c);
        for (int64_t k = first; k < last; ++k) {
          scalar_t* block = sums + k * 2 * c;
          BackwardNormBlock(in, g, k * kNormBlockRows, std::min(rows, (k + 1) * kNormBlockRows),
                            dh.data_ptr<scalar_t>(), df.data_ptr<scalar_t>(),
                            sphere ? g_alpha.data_ptr<scalar_t>() : nullptr, block,
                            with_bias ? block + c : nullptr, scratch.data());
        }
      });
      SumPartials(sums, blocks, c, dw.data_ptr<scalar_t>(),
                  with_bias ? db.data_ptr<scalar_t>() : nullptr);
    });
    const Tensor d_alpha = sphere ? g_alpha.sum().reshape(alpha.sizes()) : Tensor();
    return {dh, df, d_alpha, dw, db, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

// Runs the fused function on (..., C) inputs; alpha undefined for the add.
UpdateAndNorm ApplyFused(const Tensor& h, const Tensor& f, const Tensor& alpha,
                         const row::Rule& rule, const LayerNormImpl& norm) {
  const int64_t c = h.size(-1);
  const Tensor h2 = h.reshape({-1, c}).contiguous(), f2 = f.reshape({-1, c}).contiguous();
  const Tensor bias = norm.bias.defined() ? norm.bias.contiguous() : torch::empty({0}, h.options());
  const bool sphere = alpha.defined();
  const variable_list result = UpdateNormFunction::apply(
      h2, f2, sphere ? alpha.to(h.scalar_type()) : torch::zeros({}, h.options()),
      norm.weight.contiguous(), bias, sphere, rule.p, rule.exp_map, rule.cap, norm.eps);
  return {result[0].view(h.sizes()), result[1].view(h.sizes())};
}

// ScaleNorm's rows: y = r x / n with n = sqrt(max(<x,x>, 1e-12)).
template <typename T>
SPHERET_SIMD_CLONES void ScaleNormRows(const T* x, T r, int64_t begin, int64_t end, int64_t c,
                                       T* y) {
  for (int64_t row = begin; row < end; ++row) {
    const T* xr = x + row * c;
    T squares;
    row::RowSums<1>(
        c,
        [&](auto* acc, int64_t i) {
          const auto v = row::At<row::Elem<decltype(acc)>>(xr, i);
          acc[0] += v * v;
        },
        &squares);
    const T scale = r / std::sqrt(std::max(squares, T(1e-12)));
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) y[row * c + i] = scale * xr[i];
  }
}

// dx = (r / n) g - [<x,x> >= 1e-12] (r <g,x> / n^3) x per row; g_r[row] = <g,x> / n.
template <typename T>
SPHERET_SIMD_CLONES void ScaleNormBackwardRows(const T* g, const T* x, T r, int64_t begin,
                                               int64_t end, int64_t c, T* dx, T* g_r) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t o = row * c;
    T sums[2];  // <x,x>, <g,x>
    row::RowSums<2>(
        c,
        [&](auto* acc, int64_t i) {
          using W = row::Elem<decltype(acc)>;
          const W v = row::At<W>(x + o, i);
          acc[0] += v * v;
          acc[1] += row::At<W>(g + o, i) * v;
        },
        sums);
    const T squares = sums[0], gx = sums[1];
    const T n = std::sqrt(std::max(squares, T(1e-12)));
    const T a = r / n, b = squares >= T(1e-12) ? r * gx / (n * n * n) : T(0);
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) dx[o + i] = a * g[o + i] - b * x[o + i];
    g_r[row] = gx / n;
  }
}

// Inputs: contiguous (rows, C) x of the compute dtype; radius 0-dim of the same dtype.
class ScaleNormFusedFunction : public torch::autograd::Function<ScaleNormFusedFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& radius) {
    ctx->save_for_backward({x, radius});
    Tensor y = torch::empty_like(x);
    const int64_t rows = x.size(0), c = x.size(1);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scale_norm_forward", [&] {
      const scalar_t r = radius.item<scalar_t>();
      ParallelFor(0, rows, kNormBlockRows, [&](int64_t begin, int64_t end) {
        ScaleNormRows(x.data_ptr<scalar_t>(), r, begin, end, c, y.data_ptr<scalar_t>());
      });
    });
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &radius = saved[1];
    const Tensor g = grads[0].contiguous();
    const int64_t rows = x.size(0), c = x.size(1);
    Tensor dx = torch::empty_like(x), g_r = torch::empty({rows}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scale_norm_backward", [&] {
      const scalar_t r = radius.item<scalar_t>();
      ParallelFor(0, rows, kNormBlockRows, [&](int64_t begin, int64_t end) {
        ScaleNormBackwardRows(g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), r, begin, end, c,
                              dx.data_ptr<scalar_t>(), g_r.data_ptr<scalar_t>());
      });
    });
    return {dx, g_r.sum().reshape(radius.sizes())};
  }
};

// norm(out) by the unfused op, as LayerNormImpl::forward.
Tensor LayerNormOf(const Tensor& out, const LayerNormImpl& norm) {
  return torch::layer_norm(out, {norm.weight.size(0)}, norm.weight, norm.bias, norm.eps);
}

}  // namespace

bool NormFusable(const Tensor& h, const Tensor& f, const LayerNormImpl& norm) {
  const torch::ScalarType type = h.scalar_type();
  const bool same_type = f.scalar_type() == type && norm.weight.scalar_type() == type &&
                         (!norm.bias.defined() || norm.bias.scalar_type() == type);
  return h.device().is_cpu() && f.device().is_cpu() && norm.weight.device().is_cpu() &&
         (type == torch::kFloat || type == torch::kDouble) && same_type && h.dim() >= 1 &&
         h.sizes() == f.sizes() && h.size(-1) == norm.weight.size(0) && h.numel() > 0;
}

UpdateAndNorm AddLayerNormFused(const Tensor& h, const Tensor& f, const LayerNormImpl& norm) {
  if (!NormFusable(h, f, norm)) {
    Tensor out = h + f;
    return {out, LayerNormOf(out, norm)};
  }
  return ApplyFused(h, f, Tensor(), row::Rule{}, norm);
}

UpdateAndNorm SphereUpdateLayerNormFused(const Tensor& h, const Tensor& f, const Tensor& alpha,
                                         const SphereRule& rule, const LayerNormImpl& norm) {
  TORCH_CHECK(alpha.dim() == 0, "sphere update: alpha must be 0-dim, got ", alpha.sizes());
  if (!NormFusable(h, f, norm) || !alpha.device().is_cpu()) {
    Tensor out = SphereUpdateFused(h, f, alpha, rule);
    return {out, LayerNormOf(out, norm)};
  }
  return ApplyFused(h, f, alpha, row::SphereRowRule(rule), norm);
}

Tensor ScaleNormFused(const Tensor& x, const Tensor& radius) {
  TORCH_CHECK(radius.dim() == 0, "ScaleNorm: radius must be 0-dim, got ", radius.sizes());
  // ScaleNormFunction's math dtype: fp64 stays, everything else runs in fp32.
  const torch::ScalarType type = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  if (!x.device().is_cpu() || !radius.device().is_cpu() || x.dim() < 1 || x.numel() == 0 ||
      x.scalar_type() != type) {
    return ScaleNormFunction(x, radius);
  }
  const int64_t c = x.size(-1);
  const Tensor y = ScaleNormFusedFunction::apply(x.reshape({-1, c}).contiguous(), radius.to(type));
  return y.view(x.sizes());
}

}  // namespace spheret::nn
