#include "worker/train/gate_schedule.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "worker/nn/autonorm.h"
#include "worker/train/sharded_model.h"
#include "worker/train/side_seed.h"

namespace spheret::train {

void GateSchedule::Set(int64_t step) {
  const std::vector<nn::AutoNormConnectionImpl*> gates = model_->gpt()->gates();
  if (gates.empty()) return;
  const AutoNormMode mode = config_.connection.autonorm_mode;
  if (mode != AutoNormMode::kLearned) {
    // A uniform draw per gate from the step's own stream (random) or the run's (random_fixed):
    // the same on every shard and rank, and on resume.
    const uint64_t seed = mode == AutoNormMode::kRandom
                              ? SideSeed(config_.seed, SideStream::kGate, step)
                              : SideSeed(config_.seed, SideStream::kGateFixed, 0);
    const torch::Tensor picks = nn::DrawGateChoices(seed, static_cast<int64_t>(gates.size()));
    for (size_t i = 0; i < gates.size(); ++i) {
      gates[i]->Pick(picks[static_cast<int64_t>(i)].item<int64_t>());
    }
    return;
  }
  const int64_t horizon =
      config_.gate_freeze_step > 0 ? config_.gate_freeze_step : config_.lr_decay_iters;
  const double progress =
      horizon > 0 ? std::min(1.0, static_cast<double>(step) / static_cast<double>(horizon)) : 1.0;
  const double temperature =
      config_.gate_temp_start * std::pow(config_.gate_temp_end / config_.gate_temp_start, progress);
  // Gumbel noise from the step's own stream: the same on every shard and rank, and on resume.
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kGate, step));
  const torch::Tensor uniform =
      torch::rand({static_cast<int64_t>(gates.size()), nn::AutoNormConnectionImpl::kCandidates},
                  generator, torch::TensorOptions(torch::kDouble))
          .clamp(1e-12, 1.0 - 1e-12);
  const torch::Tensor noise = (-torch::log(-torch::log(uniform))).to(torch::kFloat);
  for (size_t i = 0; i < gates.size(); ++i) {
    if (config_.gate_freeze_step > 0 && step >= config_.gate_freeze_step) gates[i]->Freeze();
    gates[i]->SetGate(temperature, noise[static_cast<int64_t>(i)]);
  }
}

}  // namespace spheret::train
