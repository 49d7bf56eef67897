// AutoNorm's gates at each step, the same on every shard and rank and on resume: learned gates
// get their temperature, Gumbel noise and freezing; random ones the step's uniform draw;
// random_fixed the run's one draw. The step, the evaluation and the diagnostics set them first.
#pragma once

#include <cstdint>

#include "config/train_config.h"

namespace spheret::train {

class ShardedModel;

class GateSchedule {
 public:
  // `model` is not owned and outlives the schedule.
  GateSchedule(const TrainConfig& config, ShardedModel* model) : config_(config), model_(model) {}

  // Sets the gates of `step` (nothing for a model without gates).
  void Set(int64_t step);

 private:
  const TrainConfig& config_;
  ShardedModel* model_;
};

}  // namespace spheret::train
