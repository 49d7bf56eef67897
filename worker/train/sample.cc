#include "worker/train/sample.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <fstream>

#include "base/status_macros.h"
#include "config/train_config.h"
#include "protocol/trainer_events.h"
#include "worker/nn/gpt.h"
#include "worker/train/bpe.h"
#include "worker/train/checkpoint.h"
#include "worker/train/dataset.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {

absl::Status ReadRunConfig(const std::string& run_dir, TrainConfig* config) {
  const std::string path = run_dir + "/" + protocol::kConfigFile;
  std::ifstream in(path);
  if (!in)
    return absl::InvalidArgumentError("cannot read " + path + " (is " + run_dir +
                                      " a training run folder?)");
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError(path + ": not valid JSON");
  SPHERET_RETURN_IF_ERROR(Annotate(path, ApplyConfigJson(json, config)));
  return FinalizeConfig(config);
}

// Text <-> token ids of a run's data set: bytes, or GPT-2 BPE from the data set's folder.
struct Codec {
  bool gpt2 = false;
  Gpt2Bpe bpe;

  std::vector<int64_t> Encode(const std::string& text) const {
    if (gpt2) return bpe.Encode(text);
    return std::vector<int64_t>(reinterpret_cast<const unsigned char*>(text.data()),
                                reinterpret_cast<const unsigned char*>(text.data()) + text.size());
  }
  std::string Decode(const std::vector<int64_t>& ids) const {
    if (gpt2) return bpe.Decode(ids);
    std::string text;
    for (int64_t id : ids) text.push_back(static_cast<char>(id));
    return text;
  }
};

absl::Status LoadCodec(const TrainConfig& config, Codec* codec) {
  const std::string dir = ResolveDatasetDir(config);
  DatasetMeta meta;
  SPHERET_RETURN_IF_ERROR(ReadDatasetMeta(dir, &meta));
  if (meta.tokenizer == "gpt2") {
    codec->gpt2 = true;
    return codec->bpe.Load(dir + "/encoder.json", dir + "/vocab.bpe");
  }
  if (meta.tokenizer == "byte" || config.vocab_size == 256) return absl::OkStatus();
  return absl::InvalidArgumentError("cannot decode this run's tokens: its data set " + dir +
                                    " has tokenizer '" + meta.tokenizer +
                                    "' (sample decodes byte-level and GPT-2 BPE data sets)");
}

}  // namespace

absl::Status Sample(const SampleOptions& options, std::string* text) {
  if (!(options.temperature > 0)) return absl::InvalidArgumentError("temperature must be > 0");
  TrainConfig config;
  SPHERET_RETURN_IF_ERROR(ReadRunConfig(options.run_dir, &config));
  Codec codec;
  SPHERET_RETURN_IF_ERROR(LoadCodec(config, &codec));
  nn::Gpt model(ModelConfig(config, config.vocab_size));
  TrainState state;
  nlohmann::json expected = ConfigToJson(config);
  SPHERET_RETURN_IF_ERROR(LoadCheckpoint(CheckpointPath(options.run_dir), expected, *model,
                                         /*optimizer=*/nullptr, &state));
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Generator generator = at::detail::createCPUGenerator(options.seed);
  std::vector<int64_t> ids = codec.Encode(options.prompt);
  if (ids.empty()) ids.push_back(codec.gpt2 && codec.bpe.eot() >= 0 ? codec.bpe.eot() : '\n');
  torch::Tensor idx = torch::tensor(ids, torch::kLong).unsqueeze(0);  // (1, T)
  for (int64_t k = 0; k < options.tokens; ++k) {
    const int64_t t = idx.size(1);
    const torch::Tensor context =
        idx.narrow(1, std::max<int64_t>(0, t - config.block_size), std::min(t, config.block_size));
    torch::Tensor logits = model->forward(context).select(1, -1) / options.temperature;  // (1, V)
    if (options.top_k > 0 && options.top_k < logits.size(-1)) {
      const torch::Tensor kth = std::get<0>(logits.topk(options.top_k)).select(1, -1).unsqueeze(1);
      logits = logits.masked_fill(logits < kth, -INFINITY);
    }
    const torch::Tensor next = torch::multinomial(torch::softmax(logits, -1), 1, false, generator);
    idx = torch::cat({idx, next}, 1);
  }
  const int64_t* data = idx.data_ptr<int64_t>();
  *text = codec.Decode(std::vector<int64_t>(data, data + idx.size(1)));
  return absl::OkStatus();
}

}  // namespace spheret::train
