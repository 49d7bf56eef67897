#include "worker/train/optimizer.h"

#include <ATen/ops/_fused_adamw.h>
#include <torch/torch.h>

#include <stdexcept>

namespace spheret::train {

torch::Tensor FusedAdamW::step(LossClosure closure) {
  if (closure) throw std::invalid_argument("FusedAdamW::step takes no closure");
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) throw std::invalid_argument("FusedAdamW does not implement amsgrad");
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      state.step(state.step() + 1);
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(state.exp_avg());
      exp_avg_sqs.push_back(state.exp_avg_sq());
      // The kernel reads the step count (already incremented, as torch.optim does) from a tensor.
      steps.push_back(torch::full({}, static_cast<double>(state.step()),
                                  torch::TensorOptions(torch::kFloat).device(p.device())));
    }
    if (params.empty()) continue;
    const auto [beta1, beta2] = options.betas();
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps,
                      options.lr(), beta1, beta2, options.weight_decay(), options.eps(),
                      /*amsgrad=*/false, /*maximize=*/false);
  }
  return {};
}

}  // namespace spheret::train
