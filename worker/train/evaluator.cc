#include "worker/train/evaluator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "protocol/trainer_events.h"
#include "worker/train/gate_schedule.h"
#include "worker/train/sharded_model.h"
#include "worker/train/side_seed.h"
#include "worker/train/train_data.h"

namespace spheret::train {
namespace {

// ExitLosses(x, y) without gradients, the row shards computed concurrently.
std::vector<double> EvalLosses(ShardedModel& model, const torch::Tensor& x,
                               const torch::Tensor& y) {
  const int n = model.shards().size();
  const int64_t rows = x.size(0);
  // Each exit's loss on `count` of the rows, weighted by their share.
  auto weighted = [&](const torch::Tensor& losses, int64_t count) {
    const torch::Tensor cpu = losses.to(torch::kDouble).cpu();  // (exits)
    std::vector<double> values(static_cast<size_t>(cpu.numel()));
    for (size_t k = 0; k < values.size(); ++k) {
      values[k] = cpu[static_cast<int64_t>(k)].item<double>();
      if (count != rows)
        values[k] = values[k] * static_cast<double>(count) / static_cast<double>(rows);
    }
    return values;
  };
  if (n == 1) return weighted(model.ExitLosses(x, y), rows);
  std::vector<std::vector<double>> parts(n);
  model.shards().Run([&](int s) {
    torch::NoGradGuard no_grad;
    const auto [begin, count] = ShardRows(rows, n, s);
    parts[s] =
        weighted(model.ExitLosses(x.narrow(0, begin, count), y.narrow(0, begin, count)), count);
  });
  std::vector<double> total(parts[0].size(), 0.0);
  for (const std::vector<double>& part : parts) {
    for (size_t k = 0; k < total.size(); ++k) total[k] += part[k];
  }
  return total;
}

}  // namespace

std::vector<double> Evaluator::EstimateLosses(int64_t step) {
  torch::NoGradGuard no_grad;
  nn::Gpt& gpt = model_->gpt();
  gpt->eval();
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kEval, step));
  std::vector<double> total;
  for (int64_t k = 0; k < config_.eval_iters; ++k) {
    auto [x, y] = data_->Batch(data_->val(), generator, model_->device());
    const std::vector<double> losses = EvalLosses(*model_, x, y);
    total.resize(losses.size(), 0.0);
    for (size_t e = 0; e < losses.size(); ++e) total[e] += losses[e];
  }
  gpt->train();
  for (double& loss : total) loss /= static_cast<double>(config_.eval_iters);
  return total;
}

double Evaluator::Evaluate(int64_t step) {
  gates_->Set(step);  // evaluation sees this step's AutoNorm gates
  const std::vector<double> exits = EstimateLosses(step);
  const double val_loss = exits.back();
  events_->Metric(step, protocol::kValLoss, val_loss);
  events_->Metric(step, protocol::kValPpl, std::exp(val_loss));
  for (size_t k = 0; exits.size() > 1 && k < exits.size(); ++k) {
    const auto loop = static_cast<int64_t>(k + 1);
    events_->Metric(step, protocol::ValLoopLossMetricName(loop), exits[k]);
    events_->Metric(step, protocol::ValLoopPplMetricName(loop), std::exp(exits[k]));
  }
  *log_ << "step " << step << ": val loss " << val_loss << std::endl;
  return val_loss;
}

}  // namespace spheret::train
