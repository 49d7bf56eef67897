#include "worker/train/dataset.h"

#include <torch/torch.h>

#include <vector>

#include "base/status_macros.h"

namespace spheret::train {

absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> SampleBatch(const TokenFile& tokens,
                                                                    int64_t batch, int64_t block,
                                                                    torch::Generator& generator) {
  const torch::Tensor starts = torch::randint(tokens.size() - block, {batch}, generator);
  torch::Tensor x = torch::empty({batch, block}, torch::kLong);
  torch::Tensor y = torch::empty({batch, block}, torch::kLong);
  int64_t* xp = x.data_ptr<int64_t>();
  int64_t* yp = y.data_ptr<int64_t>();
  const int64_t* sp = starts.data_ptr<int64_t>();
  std::vector<uint16_t> window(static_cast<size_t>(block + 1));
  for (int64_t b = 0; b < batch; ++b) {
    SPHERET_RETURN_IF_ERROR(tokens.Read(sp[b], block + 1, window.data()));
    for (int64_t t = 0; t < block; ++t) {
      xp[b * block + t] = window[t];
      yp[b * block + t] = window[t + 1];
    }
  }
  return std::pair{x, y};
}

}  // namespace spheret::train
