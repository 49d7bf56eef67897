// Per-row scalar math of the fused sphere update, shared by the CPU loop (sphere_fused.cc) and the
// CUDA kernel (sphere_cuda_kernels.cu). Torch-free; compiles as host and device code.
//
// For one token (row) with h, f in R^C and the step size alpha:
//   pass 1: hh = <h,h>, hf = <h,f>           -> mu = hf / max(hh, eps)
//   pass 2: z = f - mu h, zz = <z,z>         -> RowForward (theta, c = cos theta, s)
//   pass 3: out = c h + s z
// The backward adds gh = <g,h>, gz = <g,z>, zh = <z,h> in pass 2 and writes, in pass 3,
//   dh = c g - mu Gz + g_hf f + 2 g_hh h,  df = Gz + g_hf h,  Gz = s g + 2 g_zz z.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define SPHERET_HD __host__ __device__
#else
#define SPHERET_HD
#endif

namespace spheret::nn::row {

using std::atan;
using std::cos;
using std::sin;
using std::sqrt;
using std::tan;

constexpr double kEps = 1e-12;  // Clamp on squared norms, as in docs/methods.md.

// theta = p atan(beta / p) (beta when exp_map), then min(theta, cap). Build one with MakeRule,
// which fills in the derived fields.
struct Rule {
  double p = 1.0;
  bool exp_map = false;  // p = infinity (geonorm).
  double cap = 1e300;    // angle_max, or a huge value when uncapped.
  // Derived: theta > cap exactly where beta / p > cap_x = tan(cap / p) (+infinity where cap / p is
  // at least pi / 2, which theta never reaches); and sin, cos of the cap.
  double cap_x = HUGE_VAL, cap_sin = 0.0, cap_cos = 1.0;
};

inline Rule MakeRule(double p, bool exp_map, double cap) {
  Rule rule{p, exp_map, cap};
  constexpr double kHalfPi = 1.5707963267948966;
  if (!exp_map && cap / p < kHalfPi) rule.cap_x = std::tan(cap / p);
  if (cap < 1e300) {
    rule.cap_sin = std::sin(cap);
    rule.cap_cos = std::cos(cap);
  }
  return rule;
}

template <typename T>
SPHERET_HD inline T Mu(T hh, T hf) {
  return hf / (hh > T(kEps) ? hh : T(kEps));
}

template <typename T>
struct Forward {
  T nh, nz, beta, dtheta, sin_t, c, s;
};

// The integer p in [1, kMaxIntegerP] that SolveForward solves without trig calls, else 0.
constexpr int kMaxIntegerP = 8;
SPHERET_HD inline int IntegerP(const Rule& rule) {
  if (rule.exp_map || !(rule.p >= 1.0 && rule.p <= kMaxIntegerP)) return 0;
  const int p = static_cast<int>(rule.p);
  return p == rule.p ? p : 0;
}

// sin and cos of theta = p atan(x) for an integer p >= 1 without trig calls:
//   p = 1 (Proj): sin = x / sqrt(1 + x^2), cos = 1 / sqrt(1 + x^2)
//   p = 2 (Cay):  sin = 2x / (1 + x^2),    cos = (1 - x^2) / (1 + x^2)
//   p >= 3: cos + i sin = (cos atan(x) + i sin atan(x))^p, the p = 1 pair raised to the p-th
//   power by p - 1 complex products, in fp64.
// x is held at 1e18 (where theta is at its limit to fp64's precision), so 1 + x^2 stays finite in
// fp32.
template <typename T>
SPHERET_HD inline void SinCosOfAtan(T x, int p, T* sin_t, T* cos_t) {
  const T held = x > T(1e18) ? T(1e18) : x;
  const T d = T(1) + held * held;
  if (p == 2) {
    *sin_t = T(2) * held / d;
    *cos_t = (T(1) - held * held) / d;
    return;
  }
  if (p == 1) {
    const T r = T(1) / sqrt(d);
    *sin_t = held * r;
    *cos_t = r;
    return;
  }
  // In fp64 whatever T is: the products' rounding, a few ulps of fp32, would move cos^2 + sin^2
  // off 1 by as much, and norms drift by that over stacked updates (the test of 1,000 updates).
  const double xd = static_cast<double>(held), r = 1.0 / sqrt(1.0 + xd * xd);
  const double s1 = xd * r, c1 = r;
  double s = s1, c = c1;
  for (int k = 1; k < p; ++k) {
    const double next_c = c * c1 - s * s1;
    s = s * c1 + c * s1;
    c = next_c;
  }
  *sin_t = static_cast<T>(s);
  *cos_t = static_cast<T>(c);
}

template <typename T>
SPHERET_HD inline Forward<T> SolveForward(T hh, T zz, T alpha, const Rule& rule) {
  Forward<T> fw;
  fw.nh = sqrt(hh > T(kEps) ? hh : T(kEps));
  fw.nz = sqrt(zz > T(kEps) ? zz : T(kEps));
  fw.beta = alpha * fw.nz / fw.nh;
  bool capped;
  if (const int p = IntegerP(rule); p > 0) {
    const T x = fw.beta / T(p);
    capped = x > T(rule.cap_x);  // theta > cap; clamp_max: the gradient passes at equality.
    fw.dtheta = capped ? T(0) : T(1) / (T(1) + x * x);
    if (!capped) SinCosOfAtan(x, p, &fw.sin_t, &fw.c);
  } else {
    T raw = fw.beta, slope = T(1);
    if (!rule.exp_map) {
      const T p = T(rule.p), x = fw.beta / p;
      raw = p * atan(x);
      slope = T(1) / (T(1) + x * x);
    }
    capped = raw > T(rule.cap);  // clamp_max: the gradient passes at equality.
    fw.dtheta = capped ? T(0) : slope;
    if (!capped) {
      fw.sin_t = sin(raw);
      fw.c = cos(raw);
    }
  }
  if (capped) {
    fw.sin_t = T(rule.cap_sin);
    fw.c = T(rule.cap_cos);
  }
  fw.s = fw.nh * fw.sin_t / fw.nz;  // = ||h|| sin(theta) / ||z||
  return fw;
}

// What a row's forward leaves for its backward (the fused update + LayerNorm keeps one per
// row): the row's sums and its solved angle, so that the backward neither sums <h,h>, <h,f>,
// <z,z> again nor calls atan, sin and cos again; it uses the forward's own values.
template <typename T>
struct RowState {
  T hh, hf, zz;
  Forward<T> fw;
};

// Coefficients of the backward for one row: dh = c g - mu Gz + g_hf f + 2 g_hh h,
// df = Gz + g_hf h with Gz = s g + 2 g_zz z; g_alpha is this row's share of d loss / d alpha.
template <typename T>
struct Backward {
  T g_zz, g_hf, g_hh, g_alpha;
};

template <typename T>
SPHERET_HD inline Backward<T> SolveBackward(T hh, T hf, T zz, T gh, T gz, T zh, T alpha,
                                            const Forward<T>& fw) {
  const T nh2 = hh > T(kEps) ? hh : T(kEps);
  const T mu = hf / nh2;
  const T g_theta = -fw.sin_t * gh + (fw.nh * fw.c / fw.nz) * gz;
  const T g_beta = g_theta * fw.dtheta;
  const T g_nz = g_beta * alpha / fw.nh - gz * fw.s / fw.nz;
  const T g_nh = -g_beta * fw.beta / fw.nh + gz * fw.sin_t / fw.nz;
  Backward<T> bw;
  bw.g_alpha = g_beta * fw.nz / fw.nh;
  bw.g_zz = zz > T(kEps) ? g_nz / (T(2) * fw.nz) : T(0);
  const T g_mu = -(fw.s * gh + T(2) * bw.g_zz * zh);  // -<Gz, h>
  bw.g_hf = g_mu / nh2;
  const T g_nh2 = -g_mu * mu / nh2 + g_nh / (T(2) * fw.nh);
  bw.g_hh = hh > T(kEps) ? g_nh2 : T(0);
  return bw;
}

}  // namespace spheret::nn::row
