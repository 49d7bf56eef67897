#include "worker/train/train_step.h"

#include <cmath>
#include <functional>

#include "worker/train/gate_schedule.h"
#include "worker/train/sharded_model.h"
#include "worker/train/train_data.h"

namespace spheret::train {
namespace {

// AdamW with nanoGPT's groups: weight decay on parameters of dim >= 2 only.
std::unique_ptr<FusedAdamW> MakeOptimizer(nn::Gpt& model, const TrainConfig& config) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(config.learning_rate)
            .betas({config.beta1, config.beta2})
            .eps(1e-8)
            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(config.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<FusedAdamW>(groups, torch::optim::AdamWOptions(config.learning_rate));
}

}  // namespace

TrainStep::TrainStep(const TrainConfig& config, Communicator* communicator, ShardedModel* model,
                     TrainData* data, GateSchedule* gates)
    : config_(config),
      communicator_(communicator),
      rank_(communicator ? communicator->rank() : 0),
      world_size_(communicator ? communicator->world_size() : 1),
      model_(model),
      data_(data),
      gates_(gates) {}

void TrainStep::Open() {
  optimizer_ = MakeOptimizer(model_->gpt(), config_);
  optimizer_->SetParallel(
      model_->shards().size(),
      [pool = &model_->shards()](const std::function<void(int)>& part) { pool->Run(part); });
}

double TrainStep::LearningRate(int64_t step) const {
  const ScheduleOptions schedule{config_.learning_rate, config_.min_lr, config_.warmup_iters,
                                 config_.lr_decay_iters, config_.decay_lr};
  return train::LearningRate(step, schedule);
}

torch::Tensor TrainStep::Backward(const torch::Tensor& x, const torch::Tensor& y, double divisor) {
  ShardPool& shards = model_->shards();
  std::vector<torch::Tensor>& params = model_->params();
  const int n = shards.size();
  if (n == 1) {
    const torch::Tensor terms = model_->Objective(x, y) / divisor;
    terms[0].backward();
    return terms.detach().to(torch::kDouble);
  }
  const int64_t rows = x.size(0);
  std::vector<torch::Tensor> losses(n);
  std::vector<std::vector<torch::Tensor>> grads(n);
  shards.Run([&](int s) {
    const auto [begin, count] = ShardRows(rows, n, s);
    const torch::Tensor terms =
        model_->Objective(x.narrow(0, begin, count), y.narrow(0, begin, count)) *
        (static_cast<double>(count) / static_cast<double>(rows)) / divisor;
    grads[s] = torch::autograd::grad({terms[0]}, params, /*grad_outputs=*/{},
                                     /*retain_graph=*/false, /*create_graph=*/false,
                                     /*allow_unused=*/true);
    losses[s] = terms.detach();
  });
  // Each gradient is its shards' sum in shard order (not in order of arrival), so a run repeats
  // bit for bit; the parameters are split among the threads for the sums.
  shards.Run([&](int s) {
    torch::NoGradGuard no_grad;
    for (size_t i = s; i < params.size(); i += n) {
      torch::Tensor sum;
      for (int k = 0; k < n; ++k) {
        const torch::Tensor& g = grads[k][i];
        if (g.defined()) sum = sum.defined() ? sum + g : g.contiguous();
      }
      if (!sum.defined()) continue;
      torch::Tensor& grad = params[i].mutable_grad();
      grad = grad.defined() ? grad + sum : sum;
    }
  });
  torch::Tensor total = losses[0].to(torch::kDouble);
  for (int k = 1; k < n; ++k) total += losses[k].to(torch::kDouble);
  return total;
}

double TrainStep::ClipGradNorm(double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : model_->params()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  ShardPool& shards = model_->shards();
  const size_t n = shards.size();
  // Shard s takes the gradients s, s + n, ...: one multi-tensor norm and one multi-tensor scaling
  // each (the same per-tensor kernels as a loop of norm and mul_, without an op call per tensor).
  std::vector<std::vector<torch::Tensor>> parts(n);
  for (size_t i = 0; i < grads.size(); ++i) parts[i % n].push_back(grads[i]);
  std::vector<std::vector<torch::Tensor>> part_norms(n);
  shards.Run([&](int s) {
    if (!parts[s].empty()) part_norms[s] = at::_foreach_norm(parts[s], 2);
  });
  std::vector<torch::Tensor> norms(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) norms[i] = part_norms[i % n][i / n];
  const torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  const torch::Tensor coef = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  shards.Run([&](int s) {
    torch::NoGradGuard no_grad;
    if (!parts[s].empty()) at::_foreach_mul_(parts[s], coef);
  });
  return total.item<double>();
}

double TrainStep::Take(int64_t step, double lr, double* grad_norm) {
  gates_->Set(step);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  // Every rank draws every micro-batch of the global batch from the same generator and trains
  // on its own share, so the global batch (and the RNG) is that of one process.
  const int64_t micro_steps = config_.gradient_accumulation_steps;
  const torch::Device device = model_->device();
  torch::Tensor step_loss;  // [objective, CE per readout], summed over micro-batches
  for (int64_t micro = 0; micro < micro_steps; ++micro) {
    auto [x, y] = data_->NextTrainBatch();
    if (micro % world_size_ != rank_) continue;
    const torch::Tensor terms =
        Backward(x.to(device), y.to(device), static_cast<double>(micro_steps / world_size_));
    step_loss = step_loss.defined() ? step_loss + terms : terms;
  }
  if (communicator_) {
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : model_->params()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    communicator_->AllReduceMean(grads);
    communicator_->AllReduceMean({step_loss});
  }
  *grad_norm = config_.grad_clip > 0 ? ClipGradNorm(config_.grad_clip) : 0.0;
  optimizer_->step();
  optimizer_->zero_grad(/*set_to_none=*/true);
  model_->gpt()->NormalizeWeights();
  terms_.clear();
  const torch::Tensor cpu = step_loss.cpu();
  for (int64_t i = 0; i < cpu.numel(); ++i) terms_.push_back(cpu[i].item<double>());
  // The reported loss is the last readout's CE; a non-finite objective diverges the run too.
  return std::isfinite(terms_.front()) ? terms_.back() : std::nan("");
}

}  // namespace spheret::train
