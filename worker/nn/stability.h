// The SpheretNorm paper's stability quantities (Proposition 6, App. D.7; the dyadic budgets of
// Proposition 10) for one sphere update, and the token-collapse diagnostic of any hidden state.
//
// One sphere update maps h to U(h) = R_h(alpha z(h)) on the sphere of radius ||h|| (per token,
// worker/nn/sphere_update.h), z = F(h) - c h with c = <h, F(h)> / ||h||^2. Its Jacobian J = dU/dh
// (F's dependence on h included) splits as J = J0 + E with
//   Dz   = P (DF - c I) - h z^T / ||h||^2           (P = I - h h^T / ||h||^2, per token)
//   J0   = the update's own part: cos(theta) on the complement of span(h, z), and in that plane a
//          rotation by theta times a shear of size k = beta phi'(beta) <= beta = alpha ||z||/||h||
//   ||E|| <= |alpha| ||P B||,  B = DF - c I
// (phi is the method's angle map, 0 <= phi' <= 1 and phi(beta) <= beta for every method and cap).
// Hence, with eta = ||z|| / ||h||,
//   sigma_max(J) <= 1 + |alpha| (||B|| + eta) <= 1 + Delta,   Delta = |alpha| (2 ||B|| + eta),
//   sigma_min(J) >= |cos theta| - Delta,                         m = max(0, |cos theta| - Delta),
// and for a stack G = J_n ... J_1: sigma_max(G) <= prod (1 + Delta_l) <= exp(sum Delta_l),
// sigma_min(G) >= prod m_l. docs/methods.md §2 gives the derivation in full.
//
// A sequence: the measurement treats the whole (1, T, C) state as one vector (attention mixes
// tokens, so DF is (TC x TC)): B = DF - diag(c_t) (x) I, eta = max_t eta_t, and |cos theta| the
// smallest over the tokens; the bounds above then hold for the Jacobian of the whole state.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "worker/nn/jacobian.h"
#include "worker/nn/sphere_update.h"

namespace spheret::nn {

// Proposition 6's quantities of one update on one sequence (whole-state reading).
struct UpdateStability {
  double b_norm = 0;       // ||B||_2, a lower estimate (Golub-Kahan-Lanczos on B)
  double eta = 0;          // max_t ||z_t|| / ||h_t||
  double alpha = 0;        // |alpha_l|
  double min_abs_cos = 1;  // min_t |cos theta_t|
  double delta() const { return alpha * (2.0 * b_norm + eta); }
  double margin() const;  // max(0, min_abs_cos - delta())
};

// The quantities of the update h -> U(h, f(h)) with step `alpha` (0-dim) under `rule`, on h
// (1, T, C); f is the sublayer as the connection calls it (inner norm included), evaluated in
// fp64 or fp32 as h is. ||B|| from `iterations` Golub-Kahan steps started from `generator`. f must
// be twice differentiable (run under a CompositeModeGuard); grad mode is enabled inside.
UpdateStability MeasureUpdateStability(const Operator& f, const torch::Tensor& h,
                                       const torch::Tensor& alpha, const SphereRule& rule,
                                       int64_t iterations, torch::Generator generator);

// The per-step depth sums over the sphere updates l = 1..n in depth order.
struct StabilitySummary {
  double delta_sum = 0;   // S = sum Delta_l
  double theta2_sum = 0;  // A = sum theta_l^2 (theta_l^2: the mean over tokens of theta^2)
  double bound_max = 1;   // exp(S) >= sigma_max(G)
  double bound_min = 1;   // prod m_l <= sigma_min(G)
  // Proposition 10's dyadic budgets: sum of theta_l^2 over I_m = {m, ..., 2m - 1} for
  // m = 1, 2, 4, ... with 2m <= n, as the paper defines them (whole intervals only, so the last
  // updates past the last I_m belong to none); budget_start[i] = m. None when n < 2.
  std::vector<int64_t> budget_start;
  std::vector<double> budget;
};
// delta, margin, theta2: one entry per update, depth order (same length).
StabilitySummary SummarizeStability(const std::vector<double>& delta,
                                    const std::vector<double>& margin,
                                    const std::vector<double>& theta2);

// Token collapse of hidden states h (B, T, C): the mean cosine similarity between the states of
// different tokens of a sequence, and the effective rank exp(-sum p_i ln p_i) of the (T x C)
// state (p_i = sigma_i / sum sigma, its singular values), each a mean over the sequences (the
// first `max_sequences` for the rank, an SVD each). T = 1: cosine 1, rank 1.
struct TokenCollapse {
  double mean_cos = 0;
  double effective_rank = 0;
};
TokenCollapse MeasureTokenCollapse(const torch::Tensor& h, int64_t max_sequences = 4);

// While one lives on this thread, sphere connections asked for diagnostics also measure
// Proposition 6 on their input (which must be one sequence, (1, T, C)), with `iterations`
// Golub-Kahan steps from a generator seeded with `seed` (the same start for every update).
class StabilityProbeGuard {
 public:
  StabilityProbeGuard(int64_t iterations, uint64_t seed);
  ~StabilityProbeGuard();
  StabilityProbeGuard(const StabilityProbeGuard&) = delete;
  StabilityProbeGuard& operator=(const StabilityProbeGuard&) = delete;
  struct Settings {
    int64_t iterations = 0;  // 0: no probe
    uint64_t seed = 0;
  };

 private:
  Settings previous_;
};
// The probe settings alive on this thread (iterations 0 when none).
StabilityProbeGuard::Settings StabilityProbe();

}  // namespace spheret::nn
