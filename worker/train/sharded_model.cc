#include "worker/train/sharded_model.h"

#include <algorithm>
#include <string>

#include "base/status_macros.h"
#include "worker/train/autocast.h"
#include "worker/train/hf_gpt2.h"
#include "worker/train/run_folder.h"
#include "worker/train/trainer.h"

namespace spheret::train {

absl::Status ShardedModel::Build(const TrainConfig& config, int64_t vocab_size, int local_rank,
                                 Communicator* communicator, std::ostream* log) {
  SPHERET_RETURN_IF_ERROR(ResolveDevice(config, local_rank, &device_));
  autocast_ = config.dtype == "bfloat16";
  model_ = nn::Gpt(ModelConfig(config, vocab_size));  // Initialized on the CPU, then moved.
  if (!config.init_from.empty()) {
    SPHERET_ASSIGN_OR_RETURN(const std::string dir, ResolveInitFromDir(config));
    SPHERET_RETURN_IF_ERROR(LoadHfGpt2Weights(dir, config, *model_, *log));
  }
  model_->to(device_);
  params_ = model_->parameters();
  if (communicator) communicator->Broadcast(params_);
  const int threads = StartingThreads();
  int64_t shards = config.batch_shards;
  if (shards == 0) {
    shards =
        device_.is_cpu() && config.dropout == 0 ? std::min<int64_t>(threads, config.batch_size) : 1;
  }
  shards_ = std::make_unique<ShardPool>(static_cast<int>(shards),
                                        std::max(1, threads / static_cast<int>(shards)));
  const int world_size = communicator ? communicator->world_size() : 1;
  const std::string script = config.connection_sha256.empty()
                                 ? std::string()
                                 : " " + config.connection_file + " (SHA-256 " +
                                       config.connection_sha256.substr(0, 12) + ")";
  *log << "spheret-lm: " << MethodId(config.connection.method) << script << ", " << config.n_layer
       << " layers x " << config.n_embd << " wide, " << model_->num_parameters() / 1e6
       << "M parameters, vocab " << vocab_size << ", " << threads << " threads"
       << (shards > 1 ? " as " + std::to_string(shards) + " batch shards" : std::string()) << ", "
       << world_size << (world_size == 1 ? " process" : " ranks") << std::endl;
  return absl::OkStatus();
}

torch::Tensor ShardedModel::ExitLosses(const torch::Tensor& x, const torch::Tensor& y) {
  CudaAutocast autocast(autocast_);
  return model_->exit_losses(x, y);
}

torch::Tensor ShardedModel::Objective(const torch::Tensor& x, const torch::Tensor& y) {
  CudaAutocast autocast(autocast_);
  return model_->objective(x, y);
}

}  // namespace spheret::train
