// The diagnostics of a run (rank 0): at diag_interval steps every update's geometry (and, for
// sphere methods, Proposition 6's probes, depth sums, bounds and dyadic budgets), at
// jacobian_interval steps the update and end-to-end Jacobians; one diag event per row. They draw
// their own batch from side streams, so they leave the run's RNG untouched.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "config/train_config.h"
#include "protocol/diag_values.h"
#include "worker/train/events.h"

namespace at {
class Tensor;
}

namespace spheret::nn {
struct ConnectionDiagnostics;
}

namespace spheret::train {

class GateSchedule;
class ShardedModel;
class TrainData;

class Diagnostics {
 public:
  // None of the pointers is owned; `rank` is this process's (only rank 0 measures).
  Diagnostics(const TrainConfig& config, int rank, ShardedModel* model, const TrainData* data,
              GateSchedule* gates, EventWriter* events)
      : config_(config), rank_(rank), model_(model), data_(data), gates_(gates), events_(events) {}

  // At a diag_interval or jacobian_interval step: sets the step's gates and emits its rows.
  void MaybeEmit(int64_t step);

 private:
  // The per-layer values of one diag step, before they become diag events.
  struct Rows {
    std::vector<protocol::DiagValues> updates;  // per update, depth order (attn, mlp, ...)
    protocol::DiagValues model;                 // layer 0: whole-model values of the step
    std::vector<std::pair<int64_t, protocol::DiagValues>> dyadic;  // (m, budget over I_m)
  };
  // The diag events of `step` (rank 0 only): the geometry and/or the Jacobians.
  void Emit(int64_t step, bool geometry, bool jacobian);
  // Every update's geometry on the batch x; for sphere methods Proposition 6 on its first
  // sequence, the depth sums and bounds (model row) and the dyadic budgets.
  void AddGeometry(int64_t step, const at::Tensor& x, Rows* rows);
  // Proposition 6 on x's first sequence for the updates of `diagnostics` (the geometry's
  // forward): per update Delta_l, m_l and what they are made of, the model row's depth sums and
  // bounds, and the dyadic budgets.
  void AddStability(int64_t step, const at::Tensor& x,
                    const std::vector<nn::ConnectionDiagnostics>& diagnostics, Rows* rows);
  // The update Jacobians J_l (with Proposition 6's bounds for sphere methods) and G on
  // `sequence` (1, T), in fp64: sigma_max from below and sigma_min as the interval
  // [*_sigma_min_lower, *_sigma_min_upper] (protocol/diag_values.h).
  void AddJacobians(int64_t step, const at::Tensor& sequence, Rows* rows);

  const TrainConfig& config_;
  const int rank_;
  ShardedModel* model_;
  const TrainData* data_;
  GateSchedule* gates_;
  EventWriter* events_;
};

}  // namespace spheret::train
