#include "worker/train/sample.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "base/status_macros.h"
#include "config/train_config.h"
#include "protocol/trainer_events.h"
#include "worker/nn/gpt.h"
#include "worker/train/run_folder.h"

namespace spheret::train {

absl::Status Sample(const SampleOptions& options, std::string* text) {
  if (!(options.temperature > 0)) return absl::InvalidArgumentError("temperature must be > 0");
  TrainConfig config;
  SPHERET_RETURN_IF_ERROR(ReadRunConfig(options.run_dir, &config));
  Codec codec;
  SPHERET_RETURN_IF_ERROR(LoadCodec(config, &codec));
  nn::Gpt model{nullptr};
  int64_t step = 0;
  SPHERET_RETURN_IF_ERROR(LoadRunModel(options.run_dir, config, &model, &step));
  torch::NoGradGuard no_grad;
  torch::Generator generator = at::detail::createCPUGenerator(options.seed);
  std::vector<int64_t> ids = codec.Encode(options.prompt);
  if (ids.empty()) ids.push_back(codec.PrefixToken());
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
