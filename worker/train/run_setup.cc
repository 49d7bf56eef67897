#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "protocol/trainer_events.h"
#include "worker/train/run.h"
#include "worker/train/run_folder.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

// AdamW with nanoGPT's groups: weight decay on parameters of dim >= 2 only.
std::unique_ptr<FusedAdamW> MakeOptimizer(nn::Gpt& model, const TrainConfig& config) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(config.learning_rate)
            .betas({config.beta1, config.beta2})
            .eps(1e-8)
            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(config.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<FusedAdamW>(groups, torch::optim::AdamWOptions(config.learning_rate));
}

}  // namespace

absl::StatusOr<int64_t> Run::OpenData() {
  const std::string dir = ResolveDatasetDir(config_);
  DatasetMeta meta;
  SPHERET_RETURN_IF_ERROR(ReadDatasetMeta(dir, &meta));
  for (auto [name, file] : {std::pair{"train.bin", &train_}, std::pair{"val.bin", &val_}}) {
    if (absl::Status opened = OpenTokenFile(dir, name, meta, kOpenCheckTokens, nullptr, file);
        !opened.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(opened.message(), " (prepare it with spheret-lm prepare --input TEXT --out ",
                       dir, "; check it with spheret-lm check-data --data ", dir, ")"));
    }
    if (file->size() <= config_.block_size) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/", name, " has ", file->size(),
                                                     " tokens, fewer than block_size + 1"));
    }
  }
  if (config_.gradient_accumulation_steps % world_size_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient_accumulation_steps (", config_.gradient_accumulation_steps,
                     ") must be a multiple of the world size (", world_size_, ")"));
  }
  if (config_.vocab_size != 0 && config_.vocab_size < meta.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("config key 'vocab_size' (", config_.vocab_size,
                                                   ") is below the dataset's ", meta.vocab_size));
  }
  return config_.vocab_size != 0 ? config_.vocab_size : meta.vocab_size;
}

absl::Status Run::BuildModel(int64_t vocab_size) {
  SPHERET_RETURN_IF_ERROR(ResolveDevice(config_, options_.local_rank, &device_));
  autocast_ = config_.dtype == "bfloat16";
  model_ = nn::Gpt(ModelConfig(config_, vocab_size));  // Initialized on the CPU, then moved.
  model_->to(device_);
  optimizer_ = MakeOptimizer(model_, config_);
  params_ = model_->parameters();
  if (options_.communicator) options_.communicator->Broadcast(params_);
  const int threads = StartingThreads();
  int64_t shards = config_.batch_shards;
  if (shards == 0) {
    shards = device_.is_cpu() && config_.dropout == 0
                 ? std::min<int64_t>(threads, config_.batch_size)
                 : 1;
  }
  shards_ = std::make_unique<ShardPool>(static_cast<int>(shards),
                                        std::max(1, threads / static_cast<int>(shards)));
  optimizer_->SetParallel(
      shards_->size(),
      [pool = shards_.get()](const std::function<void(int)>& part) { pool->Run(part); });
  *log_ << "spheret-lm: " << MethodId(config_.connection.method) << ", " << config_.n_layer
        << " layers x " << config_.n_embd << " wide, " << model_->num_parameters() / 1e6
        << "M parameters, vocab " << vocab_size << ", " << threads << " threads"
        << (shards > 1 ? " as " + std::to_string(shards) + " batch shards" : std::string()) << ", "
        << world_size_ << (world_size_ == 1 ? " process" : " ranks") << std::endl;
  return absl::OkStatus();
}

absl::Status Run::Open() {
  SPHERET_ASSIGN_OR_RETURN(const int64_t vocab_size, OpenData());
  std::error_code ec;
  fs::create_directories(options_.out_dir, ec);
  if (ec)
    return absl::InvalidArgumentError("cannot create " + options_.out_dir + ": " + ec.message());
  state_.config = ConfigToJson(config_);
  state_.config["vocab_size"] = vocab_size;  // Resolved, so config.json rebuilds the model.
  if (rank_ == 0) {
    std::ofstream(options_.out_dir + "/" + protocol::kConfigFile) << state_.config.dump(2) << "\n";
  }
  torch::manual_seed(config_.seed);
  generator_ = at::detail::createCPUGenerator(config_.seed);
  return BuildModel(vocab_size);
}

absl::Status Run::Resume(bool* resumed) {
  *resumed = false;
  const std::string path = CheckpointPath(options_.out_dir);
  std::error_code ec;
  if (!options_.resume || !fs::exists(path, ec)) return absl::OkStatus();
  TrainState saved;
  SPHERET_RETURN_IF_ERROR(LoadCheckpoint(path, state_.config, *model_, optimizer_.get(), &saved));
  generator_.set_state(saved.data_rng);
  at::Generator dropout_rng = at::detail::getDefaultCPUGenerator();  // shares the global state
  dropout_rng.set_state(saved.torch_rng);
  saved.config = state_.config;
  state_ = std::move(saved);
  *log_ << "spheret-lm: resumed from " << path << " at step " << state_.step << std::endl;
  *resumed = true;
  return absl::OkStatus();
}

absl::Status Run::StartHistory(bool resumed) {
  if (rank_ != 0) return absl::OkStatus();
  std::vector<std::string> kept;
  const std::string path = options_.out_dir + "/" + protocol::kEventsFile;
  SPHERET_RETURN_IF_ERROR(history_.Open(path, resumed ? state_.step : -1, &kept));
  if (options_.replay_events) {
    for (const std::string& line : kept) events_->EmitRaw(line);
  }
  events_->RecordTo(&history_);
  return absl::OkStatus();
}

absl::Status Run::Checkpoint() {
  if (rank_ != 0) return absl::OkStatus();
  state_.data_rng = generator_.get_state();
  state_.torch_rng = at::detail::getDefaultCPUGenerator().get_state();
  const std::string path = CheckpointPath(options_.out_dir);
  history_.Sync();  // the events up to this checkpoint are durable before it is
  SPHERET_RETURN_IF_ERROR(SaveCheckpoint(path, *model_, *optimizer_, state_));
  events_->Emit(protocol::CheckpointEvent{state_.step, path});
  return absl::OkStatus();
}

}  // namespace spheret::train
