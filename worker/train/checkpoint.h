// Training checkpoints: model, optimizer, RNG and sampler state, step, loss window and the full
// config, in one LibTorch archive written atomically (temporary file, fsync, rename, fsync of the
// folder), so a crash leaves either the old checkpoint or the new one, never half of one.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/text/dataset_identity.h"

namespace spheret::train {

// Everything of a run's state besides the model and optimizer.
struct TrainState {
  int64_t step = 0;                 // Optimizer steps taken.
  std::vector<double> loss_window;  // The last <= 200 step losses (train/loss_avg).
  int64_t loss_spikes = 0;          // Steps counted as loss spikes (train/loss_spikes).
  double val_loss = 0;              // The latest val/loss.
  torch::Tensor data_rng;           // State of the batch-sampling generator.
  torch::Tensor torch_rng;          // State of LibTorch's default CPU generator (dropout).
  nlohmann::json config;            // ConfigToJson of the run.
  // The data set trained on (worker/text/dataset_identity.h); id "" in a checkpoint written
  // before identities were recorded.
  DatasetIdentity dataset;

  double LossAverage() const;  // Mean of loss_window; 0 when empty.
};

// The checkpoint file of a run folder.
std::string CheckpointPath(const std::string& out_dir);

// Internal error naming the path and the cause when the file cannot be written and synced.
absl::Status SaveCheckpoint(const std::string& path, const torch::nn::Module& model,
                            const torch::optim::Optimizer& optimizer, const TrainState& state);

// Loads into `model` and `optimizer` (built from `config`, the run's ConfigToJson) and `state`.
// Refuses, with a message naming the file and the cause, a file that is not a spheret checkpoint,
// is truncated or corrupt (length and checksum), was written under a config that changes the
// model (CheckResumable), or whose tensors do not match the model's names and shapes.
// `optimizer` may be null (inference: the model alone is loaded).
absl::Status LoadCheckpoint(const std::string& path, const nlohmann::json& config,
                            torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                            TrainState* state);

// OK when a checkpoint written under `saved` can continue under `current`; else
// FailedPrecondition naming the first key that changes the model (method, shapes, knobs). Keys
// such as max_iters may differ.
absl::Status CheckResumable(const nlohmann::json& saved, const nlohmann::json& current);

}  // namespace spheret::train
