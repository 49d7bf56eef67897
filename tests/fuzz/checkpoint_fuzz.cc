// Fuzz target: the checkpoint loader (worker/train/checkpoint.h) on a damaged or hostile ckpt.pt,
// as `spheret-lm train --resume` and `sample` read one. Every file loads or is refused with a
// message; none may crash the trainer.
//
// The file's header carries the payload's length and FNV-1a hash, which almost every mutation
// breaks. So that the fuzzer also reaches the LibTorch archive behind the hash, an input whose
// first byte is odd has that byte dropped and its header recomputed (layout: 8 magic bytes, then
// length and hash as little-endian uint64, then the payload; written down here on purpose, as a
// second reading of the format).
//
// The model is a module of its own with two parameters and a buffer, and the config the seed
// checkpoint was written with: `checkpoint_fuzz --write-seed FILE` (the replay build) writes it.
#include <torch/torch.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "worker/train/checkpoint.h"

namespace {

struct TinyImpl : torch::nn::Module {
  TinyImpl() {
    weight = register_parameter("weight", torch::randn({3, 2}));
    bias = register_parameter("bias", torch::zeros({3}));
    scale = register_buffer("scale", torch::ones({1}));
  }
  torch::Tensor weight, bias, scale;
};

nlohmann::json Config() {
  return {{"n_layer", 1},    {"n_head", 1},        {"n_embd", 2},
          {"block_size", 3}, {"method", "pre_ln"}, {"vocab_size", 3}};
}

uint64_t Fnv1a(const std::string& bytes, size_t from) {
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = from; i < bytes.size(); ++i) {
    hash = (hash ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ull;
  }
  return hash;
}

std::string Path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("spheret_ckpt_fuzz_" + std::to_string(getpid())))
          .string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file(reinterpret_cast<const char*>(data), size);
  if (!file.empty() && (file[0] & 1)) {
    file.erase(0, 1);
    constexpr size_t kHeader = 8 + 16;
    if (file.size() >= kHeader) {
      const uint64_t header[2] = {file.size() - kHeader, Fnv1a(file, kHeader)};
      std::memcpy(file.data() + 8, header, sizeof(header));
    }
  }
  std::ofstream(Path(), std::ios::binary | std::ios::trunc).write(file.data(), file.size());
  torch::nn::ModuleHolder<TinyImpl> model;
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  spheret::train::TrainState state;
  spheret::train::LoadCheckpoint(Path(), Config(), *model, &optimizer, &state).IgnoreError();
  spheret::train::TrainState inference;
  spheret::train::LoadCheckpoint(Path(), Config(), *model, nullptr, &inference).IgnoreError();
  std::remove(Path().c_str());
  return 0;
}

// A valid checkpoint of the tiny model: the seed of the corpus.
extern "C" int SpheretFuzzWriteSeed(const char* path) {
  torch::nn::ModuleHolder<TinyImpl> model;
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  model->weight.mutable_grad() = torch::ones({3, 2});
  model->bias.mutable_grad() = torch::ones({3});
  optimizer.step();  // so the optimizer state is in the file
  spheret::train::TrainState state;
  state.step = 7;
  state.loss_window = {2.5, 2.25};
  state.val_loss = 2.0;
  state.data_rng = at::detail::createCPUGenerator(1).get_state();
  state.torch_rng = at::detail::createCPUGenerator(2).get_state();
  state.config = Config();
  const absl::Status error = spheret::train::SaveCheckpoint(path, *model, optimizer, state);
  if (!error.ok()) std::cerr << error << "\n";
  return error.ok() ? 0 : 1;
}
