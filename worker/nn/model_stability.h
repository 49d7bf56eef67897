// The stability measurements of a whole GPT on one sequence: Proposition 6's per-update values
// (worker/nn/stability.h) and the measured Jacobians they bound, for the trainer's diag and
// jacobian steps. Both run in eval mode and in the composite (twice-differentiable) mode, leave
// the model's parameters, their dtypes and its training mode as they were, draw no number from
// LibTorch's global generators, and number the updates in depth order over the loops (attention
// then MLP of each block application). The probe runs in the model's dtype; the Jacobians in fp64.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "worker/nn/connection.h"
#include "worker/nn/gpt.h"
#include "worker/nn/jacobian.h"

namespace spheret::nn {

// Every update's diagnostics on `sequence` (1, T) token ids, with Proposition 6's b_norm, eta,
// delta, margin and min_abs_cos in `extra` for the sphere updates (`iterations` Golub-Kahan steps
// for
// ||B||, from a start seeded with `seed`).
std::vector<ConnectionDiagnostics> ProbeStability(GptImpl& model, const torch::Tensor& sequence,
                                                  int64_t iterations, uint64_t seed);

// The Jacobian J_l of one update h -> h' on the sequence's state.
struct UpdateJacobian {
  // sigma_max from below; sigma_min as an interval [sigma_min_lower, sigma_min_upper] whose lower
  // end is 0 unless the Krylov space reached T C dimensions (worker/nn/jacobian.h).
  SingularRange sigma;
  // Proposition 6 on the same state (sphere methods only): 1 + Delta_l and m_l.
  std::optional<double> bound_max, bound_min;
};

// The update Jacobians J_l, and the end-to-end G = dh_final/dh_1 from the embedding norm's
// output to the last block's output (before ln_f; through the inter_loop_norm of a looped model,
// which depends on h_1 too), each with min(`iterations`, T C) Golub-Kahan steps in fp64 (the
// model is converted for the call and back, exactly: fp64 holds every fp32 and bf16 value).
struct ModelJacobians {
  std::vector<UpdateJacobian> updates;
  SingularRange e2e;
};
ModelJacobians MeasureJacobians(GptImpl& model, const torch::Tensor& sequence, int64_t iterations,
                                uint64_t seed);

}  // namespace spheret::nn
