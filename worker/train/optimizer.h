// AdamW whose step is one fused kernel per parameter group (ATen's _fused_adamw_, CPU and CUDA)
// instead of a chain of elementwise ops per parameter. Same options, state and serialization as
// torch::optim::AdamW, so checkpoints of either load into the other.
#pragma once

#include <torch/optim/adamw.h>

#include <functional>
#include <vector>

namespace spheret::train {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  // torch.optim.AdamW(fused=True)'s update. Throws std::invalid_argument for a closure or for a
  // group with amsgrad (not implemented).
  torch::Tensor step(LossClosure closure = nullptr) override;

  // Splits each group's update into `parts` concurrent calls, run(fn) calling fn(0..parts-1)
  // (ShardPool::Run); every parameter gets the same update as in one call.
  using PartRunner = std::function<void(const std::function<void(int)>&)>;
  void SetParallel(int parts, PartRunner run);

 private:
  int parts_ = 1;
  PartRunner run_;
};

}  // namespace spheret::train
