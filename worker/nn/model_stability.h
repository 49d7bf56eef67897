// The stability measurements of a whole GPT on one sequence: Proposition 6's per-update values
// (worker/nn/stability.h) and the measured Jacobians they bound, for the trainer's diag and
// jacobian steps. Both run in eval mode and in the composite (twice-differentiable) mode on the
// model's own dtype, leave the model's parameters and training mode as they were, and number the
// updates in depth order over the loops (attention then MLP of each block application).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "worker/nn/connection.h"
#include "worker/nn/gpt.h"

namespace spheret::nn {

// Every update's diagnostics on `sequence` (1, T) token ids, with Proposition 6's b_norm, eta,
// delta, margin and min_abs_cos in `extra` for the sphere updates (`iterations` Lanczos steps for
// ||B||, from a start seeded with `seed`).
std::vector<ConnectionDiagnostics> ProbeStability(GptImpl& model, const torch::Tensor& sequence,
                                                  int64_t iterations, uint64_t seed);

// The Jacobian J_l of one update h -> h' on the sequence's state.
struct UpdateJacobian {
  double sigma_max = 0;  // Lanczos: a lower estimate of the true value
  double sigma_min = 0;  // Lanczos: an upper estimate of the true value
  // Proposition 6 on the same state (sphere methods only): 1 + Delta_l and m_l.
  std::optional<double> bound_max, bound_min;
};

// The update Jacobians J_l, and the end-to-end G = dh_final/dh_1 from the embedding norm's
// output to the last block's output (before ln_f; through the inter_loop_norm of a looped model,
// which depends on h_1 too), with `iterations` Lanczos steps each.
struct ModelJacobians {
  std::vector<UpdateJacobian> updates;
  double e2e_sigma_max = 0, e2e_sigma_min = 0;
};
ModelJacobians MeasureJacobians(GptImpl& model, const torch::Tensor& sequence, int64_t iterations,
                                uint64_t seed);

}  // namespace spheret::nn
