// The model of a run: the GPT on its device, its parameters, its precision (bf16 autocast on CUDA)
// and the pool of batch shards its batches are split over. The step, the evaluation and the
// diagnostics all work on this one model.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <vector>

#include "absl/status/status.h"
#include "config/train_config.h"
#include "worker/nn/gpt.h"
#include "worker/train/communicator.h"
#include "worker/train/shard_pool.h"

namespace spheret::train {

class ShardedModel {
 public:
  // Resolves the device, builds the GPT of `config` with `vocab_size` tokens (initialized from
  // LibTorch's global generator on the CPU, then moved), broadcasts rank 0's weights when
  // `communicator` is set, starts the shard pool and logs the model's line to `log`.
  absl::Status Build(const TrainConfig& config, int64_t vocab_size, int local_rank,
                     Communicator* communicator, std::ostream* log);

  // The CE of each exit's readout on (x, y) under the run's precision, (exits).
  torch::Tensor ExitLosses(const torch::Tensor& x, const torch::Tensor& y);
  // What training minimizes, with its parts (GptImpl::objective), under the run's precision.
  torch::Tensor Objective(const torch::Tensor& x, const torch::Tensor& y);

  nn::Gpt& gpt() { return model_; }
  std::vector<torch::Tensor>& params() { return params_; }  // gpt()->parameters(), in order
  ShardPool& shards() { return *shards_; }
  torch::Device device() const { return device_; }
  bool autocast() const { return autocast_; }

 private:
  torch::Device device_ = torch::kCPU;
  bool autocast_ = false;  // bf16 autocast of the forward (CUDA).
  nn::Gpt model_{nullptr};
  std::vector<torch::Tensor> params_;
  std::unique_ptr<ShardPool> shards_;
};

}  // namespace spheret::train
