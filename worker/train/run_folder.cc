#include "worker/train/run_folder.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/status_macros.h"
#include "config/connection_script.h"
#include "config/trial_config.h"
#include "protocol/trainer_events.h"
#include "worker/train/checkpoint.h"
#include "worker/train/dataset.h"
#include "worker/train/trainer.h"

namespace spheret::train {

absl::Status ApplyConfigFile(const std::string& path, const std::string& unreadable,
                             TrainConfig* config) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(unreadable);
  std::ostringstream text;
  text << in.rdbuf();
  const TrialConfig view(text.str());
  return Annotate(path, view.ApplyTo(config));
}

absl::Status ReadRunConfig(const std::string& run_dir, TrainConfig* config) {
  const std::string path = run_dir + "/" + protocol::kConfigFile;
  SPHERET_RETURN_IF_ERROR(ApplyConfigFile(
      path, "cannot read " + path + " (is " + run_dir + " a training run folder?)", config));
  SPHERET_RETURN_IF_ERROR(FinalizeConfig(config));
  return LoadConnectionScript(config);
}

std::vector<int64_t> Codec::Encode(const std::string& text) const {
  if (gpt2) return bpe.Encode(text);
  return std::vector<int64_t>(reinterpret_cast<const unsigned char*>(text.data()),
                              reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

std::string Codec::Decode(const std::vector<int64_t>& ids) const {
  if (gpt2) return bpe.Decode(ids);
  std::string text;
  for (int64_t id : ids) text.push_back(static_cast<char>(id));
  return text;
}

int64_t Codec::PrefixToken() const { return gpt2 && bpe.eot() >= 0 ? bpe.eot() : '\n'; }

absl::Status LoadCodec(const TrainConfig& config, Codec* codec) {
  const std::string dir = ResolveDatasetDir(config);
  DatasetMeta meta;
  SPHERET_RETURN_IF_ERROR(Annotate(
      "the run's tokenizer is its data set's (" + dir + "; --data-root sets where data sets are)",
      ReadDatasetMeta(dir, &meta)));
  if (meta.tokenizer == "gpt2") {
    codec->gpt2 = true;
    return codec->bpe.Load(dir + "/encoder.json", dir + "/vocab.bpe");
  }
  if (meta.tokenizer == "byte" || config.vocab_size == 256) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "this run has no tokenizer to turn text into tokens: its data set " + dir +
      (meta.tokenizer.empty() ? std::string(" holds token ids without a meta.json naming theirs")
                              : " has tokenizer '" + meta.tokenizer + "'") +
      " (spheret-lm prepare writes byte-level and GPT-2 BPE data sets with their tokenizer)");
}

absl::Status ResolveDevice(const TrainConfig& config, int local_rank, torch::Device* device) {
  if (config.device == "cpu") {
    *device = torch::kCPU;
    return absl::OkStatus();
  }
  const int64_t count = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  const int64_t index = config.device == "cuda" ? local_rank : std::stoll(config.device.substr(5));
  if (index >= count) {
    return absl::InvalidArgumentError("device " + config.device + " (GPU " + std::to_string(index) +
                                      ") requested, but " + std::to_string(count) +
                                      " CUDA device(s) are visible");
  }
  *device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  return absl::OkStatus();
}

int StartingThreads() {
  static const int threads = torch::get_num_threads();
  return threads;
}

absl::Status LoadRunModel(const std::string& run_dir, const TrainConfig& config, nn::Gpt* model,
                          int64_t* step) {
  *model = nn::Gpt(ModelConfig(config, config.vocab_size));
  TrainState state;
  SPHERET_RETURN_IF_ERROR(LoadCheckpoint(CheckpointPath(run_dir), ConfigToJson(config), **model,
                                         /*optimizer=*/nullptr, &state));
  (*model)->eval();
  *step = state.step;
  return absl::OkStatus();
}

}  // namespace spheret::train
