#include "worker/train/optimizer.h"

#include <ATen/ops/_fused_adamw.h>
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

namespace spheret::train {

FusedAdamW::Lists FusedAdamW::Gather(torch::optim::OptimizerParamGroup& group) {
  Lists lists;
  int64_t last_step = -1;
  torch::Tensor step_tensor;
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
    lists.params.push_back(p);
    lists.grads.push_back(p.grad());
    lists.exp_avgs.push_back(state.exp_avg());
    lists.exp_avg_sqs.push_back(state.exp_avg_sq());
    // The kernel reads the step count (already incremented, as torch.optim does) from a tensor,
    // and only reads it: parameters at the same step on one device share one (one fill, not one
    // per parameter).
    const bool shared = !lists.steps.empty() && lists.steps.back().device() == p.device() &&
                        last_step == state.step();
    if (!shared) {
      last_step = state.step();
      step_tensor = torch::full({}, static_cast<double>(last_step),
                                torch::TensorOptions(torch::kFloat).device(p.device()));
    }
    lists.steps.push_back(step_tensor);
  }
  return lists;
}

void FusedAdamW::UpdatePart(const Lists& lists, const torch::optim::AdamWOptions& options, int part,
                            int parts) {
  std::vector<torch::Tensor> p, g, m, v, t;
  for (size_t i = part; i < lists.params.size(); i += parts) {
    p.push_back(lists.params[i]);
    g.push_back(lists.grads[i]);
    m.push_back(lists.exp_avgs[i]);
    v.push_back(lists.exp_avg_sqs[i]);
    t.push_back(lists.steps[i]);
  }
  if (p.empty()) return;
  const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
  at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, t, options.lr(), beta1, beta2,
                    options.weight_decay(), options.eps(), /*amsgrad=*/false,
                    /*maximize=*/false);
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  if (closure) throw std::invalid_argument("FusedAdamW::step takes no closure");
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) throw std::invalid_argument("FusedAdamW does not implement amsgrad");
    const Lists lists = Gather(group);
    if (lists.params.empty()) continue;
    if (parts_ == 1) {
      UpdatePart(lists, options, 0, parts_);
    } else {
      run_([&](int part) {  // Part k: the parameters k, k + parts, ...
        torch::NoGradGuard part_no_grad;
        UpdatePart(lists, options, part, parts_);
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
