#include "worker/train/optimizer.h"

#include <ATen/ops/_fused_adamw.h>
#include <torch/torch.h>

#include <algorithm>
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
    const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
    auto update = [&](int part) {  // Part k: the parameters k, k + parts, ...
      std::vector<torch::Tensor> p, g, m, v, t;
      for (size_t i = part; i < params.size(); i += parts_) {
        p.push_back(params[i]);
        g.push_back(grads[i]);
        m.push_back(exp_avgs[i]);
        v.push_back(exp_avg_sqs[i]);
        t.push_back(steps[i]);
      }
      if (p.empty()) return;
      at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, t, options.lr(), beta1, beta2,
                        options.weight_decay(), options.eps(), /*amsgrad=*/false,
                        /*maximize=*/false);
    };
    if (parts_ == 1) {
      update(0);
    } else {
      run_([&](int part) {
        torch::NoGradGuard part_no_grad;
        update(part);
      });
    }
  }
  return {};
}

void FusedAdamW::SetParallel(int parts, PartRunner run) {
  parts_ = std::max(parts, 1);
  run_ = std::move(run);
}

}  // namespace spheret::train
