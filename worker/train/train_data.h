// The data of a run: its token files (train.bin, val.bin) and the generator that draws the
// training batches, whose state a checkpoint saves. Evaluation and diagnostics draw from
// generators of their own (side_seed.h) through Batch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "config/train_config.h"
#include "worker/text/dataset_identity.h"
#include "worker/train/dataset.h"

namespace spheret::train {

class TrainData {
 public:
  explicit TrainData(const TrainConfig& config) : config_(config) {}

  // Opens config.dataset's train.bin and val.bin, computes their identity and seeds the training
  // generator with config.seed; returns the run's vocabulary (config.vocab_size, else the
  // dataset's).
  // InvalidArgument names the file or key at fault (also gradient_accumulation_steps that
  // `world_size` does not divide).
  absl::StatusOr<int64_t> Open(int world_size);

  // The next training micro-batch (x, y) on the CPU, from the training generator. Throws on a
  // data set truncated under the run (Train turns it into the run's error).
  std::pair<torch::Tensor, torch::Tensor> NextTrainBatch();
  // A batch of random windows of `tokens` drawn from `generator`, on `device`.
  std::pair<torch::Tensor, torch::Tensor> Batch(const TokenFile& tokens,
                                                torch::Generator& generator,
                                                torch::Device device) const;

  const TokenFile& train() const { return train_; }
  const TokenFile& val() const { return val_; }
  // The opened data set's identity and folder (worker/text/dataset_identity.h), for checkpoints.
  const DatasetIdentity& identity() const { return identity_; }
  torch::Generator& generator() { return generator_; }  // The training batches' generator.

 private:
  const TrainConfig& config_;
  TokenFile train_, val_;
  DatasetIdentity identity_;
  torch::Generator generator_;
};

}  // namespace spheret::train
