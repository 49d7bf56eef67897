#include "worker/train/checkpointer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "protocol/trainer_events.h"
#include "worker/train/checkpoint.h"
#include "worker/train/sharded_model.h"
#include "worker/train/train_data.h"
#include "worker/train/train_step.h"
#include "worker/train/trainer.h"

namespace spheret::train {

namespace fs = std::filesystem;

absl::Status Checkpointer::WriteConfig(int64_t vocab_size) {
  std::error_code ec;
  fs::create_directories(options_.out_dir, ec);
  if (ec)
    return absl::InvalidArgumentError("cannot create " + options_.out_dir + ": " + ec.message());
  state_->config = ConfigToJson(config_);
  state_->config["vocab_size"] = vocab_size;  // Resolved, so config.json rebuilds the model.
  state_->dataset = data_->identity();
  if (rank_ == 0) {
    std::ofstream(options_.out_dir + "/" + protocol::kConfigFile) << state_->config.dump(2) << "\n";
  }
  return absl::OkStatus();
}

absl::Status Checkpointer::Resume(bool* resumed) {
  *resumed = false;
  const std::string path = CheckpointPath(options_.out_dir);
  std::error_code ec;
  if (!options_.resume || !fs::exists(path, ec)) return absl::OkStatus();
  TrainState saved;
  SPHERET_RETURN_IF_ERROR(
      LoadCheckpoint(path, state_->config, *model_->gpt(), &step_->optimizer(), &saved));
  // The rest of the run trains on the data it trained on (issue 44, item 9).
  std::string warning;
  SPHERET_RETURN_IF_ERROR(Annotate("cannot resume from " + path,
                                   CheckSameDataset(saved.dataset, state_->dataset, &warning)));
  if (!warning.empty()) *log_ << "spheret-lm: warning: " << path << ": " << warning << std::endl;
  data_->generator().set_state(saved.data_rng);
  at::Generator dropout_rng = at::detail::getDefaultCPUGenerator();  // shares the global state
  dropout_rng.set_state(saved.torch_rng);
  saved.config = state_->config;
  saved.dataset = state_->dataset;  // the same, or recorded from now on
  *state_ = std::move(saved);
  *log_ << "spheret-lm: resumed from " << path << " at step " << state_->step << std::endl;
  *resumed = true;
  return absl::OkStatus();
}

absl::Status Checkpointer::StartHistory(bool resumed) {
  if (rank_ != 0) return absl::OkStatus();
  std::vector<std::string> kept;
  const std::string path = options_.out_dir + "/" + protocol::kEventsFile;
  SPHERET_RETURN_IF_ERROR(history_.Open(path, resumed ? state_->step : -1, &kept));
  if (options_.replay_events) {
    for (const std::string& line : kept) events_->EmitRaw(line);
  }
  events_->RecordTo([this](const std::string& line) { history_.Append(line); });
  return absl::OkStatus();
}

absl::Status Checkpointer::Save() {
  if (rank_ != 0) return absl::OkStatus();
  state_->data_rng = data_->generator().get_state();
  state_->torch_rng = at::detail::getDefaultCPUGenerator().get_state();
  const std::string path = CheckpointPath(options_.out_dir);
  history_.Sync();  // the events up to this checkpoint are durable before it is
  SPHERET_RETURN_IF_ERROR(SaveCheckpoint(path, *model_->gpt(), step_->optimizer(), *state_));
  events_->Emit(protocol::CheckpointEvent{state_->step, path});
  return absl::OkStatus();
}

}  // namespace spheret::train
