// One optimizer step of a run: the learning rate schedule, gradient_accumulation_steps
// micro-batches with their backward passes over the batch shards, the gradients averaged across
// ranks under data parallelism, global-norm clipping and AdamW (nanoGPT's groups). Owns the
// optimizer.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "config/train_config.h"
#include "worker/train/communicator.h"
#include "worker/train/optimizer.h"
#include "worker/train/schedule.h"

namespace spheret::train {

class GateSchedule;
class ShardedModel;
class TrainData;

class TrainStep {
 public:
  // None of the pointers is owned; `communicator` may be null (one process).
  TrainStep(const TrainConfig& config, Communicator* communicator, ShardedModel* model,
            TrainData* data, GateSchedule* gates);

  // Builds the optimizer over the (built) model's parameters.
  void Open();

  // The learning rate of `step`.
  double LearningRate(int64_t step) const;
  // Optimizer step `step` at learning rate `lr`; returns the step's loss (the last readout's CE;
  // NaN when the objective is not finite) and sets *grad_norm (before clipping; 0 unclipped).
  double Take(int64_t step, double lr, double* grad_norm);

  // The last step's [objective, CE per readout].
  const std::vector<double>& terms() const { return terms_; }
  FusedAdamW& optimizer() { return *optimizer_; }

 private:
  // Adds the gradient of objective(x, y) / divisor to the parameters' gradients, the batch's row
  // shards computed concurrently; returns objective(x, y)'s terms / divisor (fp64, detached).
  torch::Tensor Backward(const torch::Tensor& x, const torch::Tensor& y, double divisor);
  // torch::nn::utils::clip_grad_norm_ (2-norm) with the per-parameter work split among the shard
  // threads; returns the norm before clipping.
  double ClipGradNorm(double max_norm);

  const TrainConfig& config_;
  Communicator* communicator_;
  const int rank_, world_size_;
  ShardedModel* model_;
  TrainData* data_;
  GateSchedule* gates_;
  std::unique_ptr<FusedAdamW> optimizer_;
  std::vector<double> terms_;
};

}  // namespace spheret::train
