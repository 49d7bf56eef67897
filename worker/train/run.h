// The training run behind Train and CompareStepTimes (internal to spheret_train): data, model,
// optimizer, RNG and the loss window. run_setup.cc opens, resumes and checkpoints it; run_step.cc
// holds the step (batches, loss, backward, clipping, evaluation); trainer.cc the loop.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/diag_values.h"
#include "worker/nn/gpt.h"
#include "worker/train/checkpoint.h"
#include "worker/train/dataset.h"
#include "worker/train/event_history.h"
#include "worker/train/optimizer.h"
#include "worker/train/schedule.h"
#include "worker/train/shard_pool.h"
#include "worker/train/trainer.h"

namespace spheret::train {

using Clock = std::chrono::steady_clock;

// One training run: data, model, optimizer, RNG and the loss window.
class Run {
 public:
  Run(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
      std::ostream* log)
      : config_(config),
        options_(options),
        rank_(options.communicator ? options.communicator->rank() : 0),
        world_size_(options.communicator ? options.communicator->world_size() : 1),
        null_stream_(nullptr),
        null_events_(&null_stream_),
        events_(rank_ == 0 ? events : &null_events_),
        log_(rank_ == 0 ? log : &null_stream_) {}

  // Opens the data set and builds the model, the optimizer and the shard pool.
  absl::Status Open();
  // Loads OUT/checkpoint when resuming and one exists (*resumed says whether).
  absl::Status Resume(bool* resumed);
  // Rank 0: starts OUT/events.jsonl (trimmed to the resume step), replaying it when asked.
  absl::Status StartHistory(bool resumed);
  TrainResult Loop(bool resumed);
  // One training step at `step`'s learning rate; returns its wall time in seconds.
  double TimedStep(int64_t step);

 private:
  // The mean loss of each exit (loops; 1 unlooped, the last is the model's loss) over eval_iters
  // batches of `tokens` drawn from a generator seeded by the step.
  std::vector<double> EstimateLosses(const TokenFile& tokens, int64_t step);
  // A batch of random windows on the run's device.
  std::pair<torch::Tensor, torch::Tensor> Batch(const TokenFile& tokens,
                                                torch::Generator& generator);
  // The CE of each exit's readout on (x, y) under the run's precision, (loops).
  torch::Tensor ExitLosses(const torch::Tensor& x, const torch::Tensor& y);
  // What training minimizes, with its parts (GptImpl::objective), under the run's precision.
  torch::Tensor Objective(const torch::Tensor& x, const torch::Tensor& y);
  // Adds the gradient of objective(x, y) / divisor to the parameters' gradients, the batch's row
  // shards computed concurrently; returns objective(x, y)'s terms / divisor (fp64, detached).
  torch::Tensor Backward(const torch::Tensor& x, const torch::Tensor& y, double divisor);
  // ExitLosses(x, y) without gradients, the row shards computed concurrently.
  std::vector<double> EvalLosses(const torch::Tensor& x, const torch::Tensor& y);
  // The diag events at diag_interval steps, the block Jacobians at jacobian_interval steps.
  void MaybeEmitDiagnostics(int64_t step);
  // The per-layer values of one diag step, before they become diag events.
  struct DiagRows {
    std::vector<protocol::DiagValues> updates;  // per update, depth order (attn, mlp, ...)
    protocol::DiagValues model;                 // layer 0: whole-model values of the step
    std::vector<std::pair<int64_t, protocol::DiagValues>> dyadic;  // (m, budget over I_m)
  };
  // The diag events of `step` (rank 0 only): the geometry (diag_interval) and the update and
  // end-to-end Jacobians (jacobian_interval), one event per row.
  void EmitDiagnostics(int64_t step, bool geometry, bool jacobian);
  // Every update's geometry on the batch x; for sphere methods Proposition 6 on its first
  // sequence, the depth sums and bounds (model row) and the dyadic budgets.
  void AddGeometry(int64_t step, const torch::Tensor& x, DiagRows* rows);
  // The update Jacobians J_l (with Proposition 6's bounds for sphere methods) and G on
  // `sequence` (1, T).
  void AddJacobians(int64_t step, const torch::Tensor& sequence, DiagRows* rows);
  // AutoNorm: the gates of `step`: learned, their temperature and Gumbel noise, and their
  // freezing; random, the step's uniform draw; random_fixed, the run's one draw.
  void PrepareGates(int64_t step);
  absl::Status Checkpoint();
  // Open's parts: the data and the resolved vocabulary; the model and what trains it.
  absl::StatusOr<int64_t> OpenData();
  absl::Status BuildModel(int64_t vocab_size);
  // Loop's parts: the evaluation (and checkpoint) at `step`, and the log line of a step.
  absl::Status Evaluate(int64_t step, bool at_end);
  void LogStep(int64_t step, int64_t first, double step_loss, double lr, double grad_norm,
               double seconds, double elapsed);
  // Whether options_.stop is raised on any rank (a collective under data parallelism).
  bool StopRequested();
  // torch::nn::utils::clip_grad_norm_ (2-norm) with the per-parameter work split among the shard
  // threads; returns the norm before clipping.
  double ClipGradNorm(double max_norm);
  ScheduleOptions Schedule() const {
    return {config_.learning_rate, config_.min_lr, config_.warmup_iters, config_.lr_decay_iters,
            config_.decay_lr};
  }
  // One optimizer step `step` at learning rate `lr`; returns the step's loss (the last
  // readout's CE; NaN when the objective is not finite). step_terms_ keeps all its terms.
  double TrainStep(int64_t step, double lr, double* grad_norm);

  const TrainConfig& config_;
  const TrainOptions& options_;
  const int rank_, world_size_;
  std::ostream null_stream_;  // Ranks other than 0 write nowhere.
  EventWriter null_events_;
  EventWriter* events_;
  std::ostream* log_;
  TokenFile train_, val_;
  torch::Device device_ = torch::kCPU;
  bool autocast_ = false;  // bf16 autocast of the forward (CUDA).
  nn::Gpt model_{nullptr};
  std::unique_ptr<FusedAdamW> optimizer_;
  std::vector<torch::Tensor> params_;  // model_->parameters(), in order
  std::unique_ptr<ShardPool> shards_;
  torch::Generator generator_;
  TrainState state_;
  EventHistory history_;
  std::vector<double> step_terms_;  // the last step's [objective, CE per readout]
};

}  // namespace spheret::train
