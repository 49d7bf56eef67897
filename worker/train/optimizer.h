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
  // A group's parameters that have gradients, with their gradients and AdamW state, index for
  // index: the fused kernel's arguments.
  struct Lists {
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  };
  // The lists of `group`, each parameter's state created at its first step and its step counted.
  Lists Gather(torch::optim::OptimizerParamGroup& group);
  // The fused update of `lists`' part `part` (parameters part, part + parts_, ...).
  static void UpdatePart(const Lists& lists, const torch::optim::AdamWOptions& options, int part,
                         int parts);

  int parts_ = 1;
  PartRunner run_;
};

}  // namespace spheret::train
