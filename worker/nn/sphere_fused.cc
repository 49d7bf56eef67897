#include "worker/nn/sphere_fused.h"

#include <torch/torch.h>

#include "worker/nn/parallel.h"
#include "worker/nn/row_sums.h"
#include "worker/nn/sphere_cuda.h"
#include "worker/nn/sphere_row_math.h"
#include "worker/nn/sphere_rows.h"

namespace spheret::nn {
namespace {

using torch::Tensor;
constexpr int64_t kGrain = 16;  // Rows per parallel task.

// The row kernels are compiled three times, for AVX-512, AVX2 and baseline x86-64, and the loader
// picks the one the CPU runs (GCC/Clang function multiversioning): 16-, 8- or 4-wide fp32 vectors.
// Their sums are row_sums.h's.
#ifndef SPHERET_SIMD_CLONES
#define SPHERET_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

// Pass 1 of a row: <h,h> and <h,f>. Inlined into each clone.
template <typename T>
__attribute__((always_inline)) inline void RowDots(const T* hr, const T* fr, int64_t c, T* hh_out,
                                                   T* hf_out) {
  T sums[2];
  row::RowSums<2>(
      c,
      [&](auto* acc, int64_t i) {
        using W = row::Elem<decltype(acc)>;
        const W h = row::At<W>(hr, i);
        acc[0] += h * h;
        acc[1] += h * row::At<W>(fr, i);
      },
      sums);
  *hh_out = sums[0];
  *hf_out = sums[1];
}

// <z,z> with z = f - mu h over a row.
template <typename T>
__attribute__((always_inline)) inline T RowZz(const T* hr, const T* fr, T mu, int64_t c) {
  T zz;
  row::RowSums<1>(
      c,
      [&](auto* acc, int64_t i) {
        using W = row::Elem<decltype(acc)>;
        const W z = row::At<W>(fr, i) - mu * row::At<W>(hr, i);
        acc[0] += z * z;
      },
      &zz);
  return zz;
}

// <g,h>, <g,z>, <z,h> with z = f - mu h over a row, into sums[0 .. 3).
template <typename T>
__attribute__((always_inline)) inline void RowGradientDots(const T* gr, const T* hr, const T* fr,
                                                           T mu, int64_t c, T* sums) {
  row::RowSums<3>(
      c,
      [&](auto* acc, int64_t i) {
        using W = row::Elem<decltype(acc)>;
        const W g = row::At<W>(gr, i), h = row::At<W>(hr, i);
        const W z = row::At<W>(fr, i) - mu * h;
        acc[0] += g * h;
        acc[1] += g * z;
        acc[2] += z * h;
      },
      sums);
}

// out = c h + s z for one row; *state (if given) receives the row's sums and angle.
template <typename T>
SPHERET_SIMD_CLONES void ForwardRow(const T* hr, const T* fr, T alpha, const row::Rule& rule,
                                    int64_t c, T* o, row::RowState<T>* state) {
  T hh, hf;
  RowDots(hr, fr, c, &hh, &hf);
  const T mu = row::Mu(hh, hf);
  const T zz = RowZz(hr, fr, mu, c);
  const row::Forward<T> fw = row::SolveForward(hh, zz, alpha, rule);
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) o[i] = fw.c * hr[i] + fw.s * (fr[i] - mu * hr[i]);
  if (state != nullptr) *state = {hh, hf, zz, fw};
}

// The backward's last pass over a row: dh, df from the row's coefficients.
template <typename T>
__attribute__((always_inline)) inline void WriteRowGradients(const T* gr, const T* hr, const T* fr,
                                                             T mu, const row::Forward<T>& fw,
                                                             const row::Backward<T>& bw, int64_t c,
                                                             T* dhr, T* dfr) {
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) {
    const T gz_i = fw.s * gr[i] + T(2) * bw.g_zz * (fr[i] - mu * hr[i]);  // Gz
    dhr[i] = fw.c * gr[i] - mu * gz_i + bw.g_hf * fr[i] + T(2) * bw.g_hh * hr[i];
    dfr[i] = gz_i + bw.g_hf * hr[i];
  }
}

// dh, df for one row; returns the row's share of d loss / d alpha.
template <typename T>
SPHERET_SIMD_CLONES T BackwardRow(const T* gr, const T* hr, const T* fr, T alpha,
                                  const row::Rule& rule, int64_t c, T* dhr, T* dfr) {
  T hh, hf;
  RowDots(hr, fr, c, &hh, &hf);
  const T mu = row::Mu(hh, hf);
  const T zz = RowZz(hr, fr, mu, c);
  T dots[3];  // <g,h>, <g,z>, <z,h>
  RowGradientDots(gr, hr, fr, mu, c, dots);
  const row::Forward<T> fw = row::SolveForward(hh, zz, alpha, rule);
  const row::Backward<T> bw = row::SolveBackward(hh, hf, zz, dots[0], dots[1], dots[2], alpha, fw);
  WriteRowGradients(gr, hr, fr, mu, fw, bw, c, dhr, dfr);
  return bw.g_alpha;
}

// BackwardRow from the row's forward state: one pass of sums (<g,h>, <g,z>, <z,h>), then dh, df.
// The state is copied in: read through a pointer, its values could alias dh and df (same type),
// and the compiler would reload them in every iteration of the write loop instead of vectorizing.
template <typename T>
SPHERET_SIMD_CLONES T BackwardRowFromState(const T* gr, const T* hr, const T* fr, T alpha,
                                           const row::RowState<T>* state, int64_t c, T* dhr,
                                           T* dfr) {
  const row::RowState<T> st = *state;
  const T mu = row::Mu(st.hh, st.hf);
  T dots[3];  // <g,h>, <g,z>, <z,h>
  RowGradientDots(gr, hr, fr, mu, c, dots);
  const row::Backward<T> bw =
      row::SolveBackward(st.hh, st.hf, st.zz, dots[0], dots[1], dots[2], alpha, st.fw);
  WriteRowGradients(gr, hr, fr, mu, st.fw, bw, c, dhr, dfr);
  return bw.g_alpha;
}

template <typename T>
void ForwardRows(const T* h, const T* f, T alpha, const row::Rule& rule, int64_t rows, int64_t c,
                 T* out) {
  ParallelFor(0, rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      ForwardRow(h + r * c, f + r * c, alpha, rule, c, out + r * c,
                 static_cast<row::RowState<T>*>(nullptr));
  });
}

template <typename T>
void BackwardRows(const T* g, const T* h, const T* f, T alpha, const row::Rule& rule, int64_t rows,
                  int64_t c, T* dh, T* df, T* g_alpha) {
  ParallelFor(0, rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t offset = r * c;
      g_alpha[r] =
          BackwardRow(g + offset, h + offset, f + offset, alpha, rule, c, dh + offset, df + offset);
    }
  });
}

Tensor ForwardCpu(const Tensor& h, const Tensor& f, const Tensor& alpha, const row::Rule& rule) {
  Tensor out = torch::empty_like(h);
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "sphere_forward_cpu", [&] {
    ForwardRows<scalar_t>(h.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), alpha.item<scalar_t>(),
                          rule, h.size(0), h.size(1), out.data_ptr<scalar_t>());
  });
  return out;
}

std::tuple<Tensor, Tensor, Tensor> BackwardCpu(const Tensor& g, const Tensor& h, const Tensor& f,
                                               const Tensor& alpha, const row::Rule& rule) {
  Tensor dh = torch::empty_like(h), df = torch::empty_like(f);
  Tensor g_alpha = torch::empty({h.size(0)}, h.options());
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "sphere_backward_cpu", [&] {
    BackwardRows<scalar_t>(g.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(),
                           alpha.item<scalar_t>(), rule, h.size(0), h.size(1),
                           dh.data_ptr<scalar_t>(), df.data_ptr<scalar_t>(),
                           g_alpha.data_ptr<scalar_t>());
  });
  return {dh, df, g_alpha};
}

// Inputs are contiguous (rows, C) tensors of the compute dtype, on CPU or (with the kernel) CUDA.
class SphereFunction : public torch::autograd::Function<SphereFunction> {
 public:
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& h, const Tensor& f,
                        const Tensor& alpha, double p, bool exp_map, double cap) {
    ctx->save_for_backward({h, f, alpha});
    ctx->saved_data["p"] = p;
    ctx->saved_data["exp_map"] = exp_map;
    ctx->saved_data["cap"] = cap;
    const row::Rule rule = row::MakeRule(p, exp_map, cap);
    return h.is_cuda() ? CudaSphereKernels()->forward(h, f, alpha, rule)
                       : ForwardCpu(h, f, alpha, rule);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &h = saved[0], &f = saved[1], &alpha = saved[2];
    const row::Rule rule =
        row::MakeRule(ctx->saved_data["p"].toDouble(), ctx->saved_data["exp_map"].toBool(),
                      ctx->saved_data["cap"].toDouble());
    const Tensor g = grads[0].contiguous();
    auto [dh, df, g_alpha] = h.is_cuda() ? CudaSphereKernels()->backward(g, h, f, alpha, rule)
                                         : BackwardCpu(g, h, f, alpha, rule);
    return {dh, df, g_alpha.sum().reshape(alpha.sizes()), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

namespace row {

Rule SphereRowRule(const SphereRule& rule) {
  const double p = rule.effective_p();
  return MakeRule(p, std::isinf(p), rule.capped() ? rule.angle_max : Rule{}.cap);
}

void SphereForwardRow(const float* h, const float* f, float alpha, const Rule& rule, int64_t c,
                      float* out, RowState<float>* state) {
  ForwardRow(h, f, alpha, rule, c, out, state);
}
void SphereForwardRow(const double* h, const double* f, double alpha, const Rule& rule, int64_t c,
                      double* out, RowState<double>* state) {
  ForwardRow(h, f, alpha, rule, c, out, state);
}
float SphereBackwardRow(const float* g, const float* h, const float* f, float alpha,
                        const RowState<float>& state, int64_t c, float* dh, float* df) {
  return BackwardRowFromState(g, h, f, alpha, &state, c, dh, df);
}
double SphereBackwardRow(const double* g, const double* h, const double* f, double alpha,
                         const RowState<double>& state, int64_t c, double* dh, double* df) {
  return BackwardRowFromState(g, h, f, alpha, &state, c, dh, df);
}

}  // namespace row

bool SphereCudaKernelBuilt() { return CudaSphereKernels() != nullptr; }

Tensor SphereUpdateFused(const Tensor& h, const Tensor& f, const Tensor& alpha,
                         const SphereRule& rule) {
  TORCH_CHECK(h.sizes() == f.sizes(), "sphere update: h ", h.sizes(), " and F ", f.sizes(),
              " differ in shape");
  TORCH_CHECK(alpha.dim() == 0, "sphere update: alpha must be 0-dim, got ", alpha.sizes());
  TORCH_CHECK(h.device() == f.device() && h.device() == alpha.device(),
              "sphere update: h, F and alpha must be on one device, got ", h.device(), ", ",
              f.device(), ", ", alpha.device());
  if (h.is_cuda() && !SphereCudaKernelBuilt()) return SphereUpdateComposite(h, f, alpha, rule);
  const torch::ScalarType type = SphereComputeType(h, f);
  const int64_t c = h.size(-1);
  const Tensor h2 = h.to(type).reshape({-1, c}).contiguous();  // (rows, C)
  const Tensor f2 = f.to(type).reshape({-1, c}).contiguous();  // (rows, C)
  const row::Rule r = row::SphereRowRule(rule);
  const Tensor out = SphereFunction::apply(h2, f2, alpha.to(type), r.p, r.exp_map, r.cap);
  return out.reshape(h.sizes()).to(h.scalar_type());
}

}  // namespace spheret::nn
