#include "worker/train/train_data.h"

#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {

// SampleBatch, its error thrown: Train turns it into the run's error.
std::pair<torch::Tensor, torch::Tensor> SampleOrThrow(const TokenFile& tokens, int64_t batch,
                                                      int64_t block, torch::Generator& generator) {
  absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> sampled =
      SampleBatch(tokens, batch, block, generator);
  if (!sampled.ok()) throw std::runtime_error(std::string(sampled.status().message()));
  return *std::move(sampled);
}

}  // namespace

absl::StatusOr<int64_t> TrainData::Open(int world_size) {
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
  if (config_.gradient_accumulation_steps % world_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient_accumulation_steps (", config_.gradient_accumulation_steps,
                     ") must be a multiple of the world size (", world_size, ")"));
  }
  // A folder without meta (nanoGPT's openwebtext) holds GPT-2's 50,257 ids, whose default vocab is
  // nanoGPT's padded 50,304: a model of GPT-2's own 50,257 (init_from: hf-gpt2:) reads them too.
  const int64_t needed = meta.path.empty() ? 50257 : meta.vocab_size;
  if (config_.vocab_size != 0 && config_.vocab_size < needed) {
    return absl::InvalidArgumentError(absl::StrCat("config key 'vocab_size' (", config_.vocab_size,
                                                   ") is below the dataset's ", needed));
  }
  identity_.dir = dir;
  SPHERET_RETURN_IF_ERROR(
      ComputeDatasetId(train_, val_, meta.vocab_size, meta.tokenizer, &identity_.id));
  generator_ = at::detail::createCPUGenerator(config_.seed);
  return config_.vocab_size != 0 ? config_.vocab_size : meta.vocab_size;
}

std::pair<torch::Tensor, torch::Tensor> TrainData::NextTrainBatch() {
  return SampleOrThrow(train_, config_.batch_size, config_.block_size, generator_);
}

std::pair<torch::Tensor, torch::Tensor> TrainData::Batch(const TokenFile& tokens,
                                                         torch::Generator& generator,
                                                         torch::Device device) const {
  auto [x, y] = SampleOrThrow(tokens, config_.batch_size, config_.block_size, generator);
  return {x.to(device), y.to(device)};
}

}  // namespace spheret::train
