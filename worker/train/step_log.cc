#include "worker/train/step_log.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "protocol/trainer_events.h"
#include "worker/train/checkpoint.h"
#include "worker/train/train_step.h"

namespace spheret::train {
namespace {

constexpr size_t kLossWindow = 200;   // train/loss_avg: mean of the last 200 step losses.
constexpr size_t kSpikeContext = 10;  // losses before a step that make a mean to spike above

std::string FormatDuration(double seconds) {
  char text[32];
  const auto s = static_cast<long>(seconds + 0.5);
  std::snprintf(text, sizeof(text), "%ld:%02ld", s / 60, s % 60);
  return text;
}

}  // namespace

void StepLog::Record(double step_loss) {
  if (state_->loss_window.size() >= kSpikeContext &&
      step_loss > state_->LossAverage() + config_.spike_margin) {
    ++state_->loss_spikes;
  }
  state_->loss_window.push_back(step_loss);
  if (state_->loss_window.size() > kLossWindow) {
    state_->loss_window.erase(state_->loss_window.begin());
  }
}

void StepLog::Write(int64_t step, int64_t first, const StepFigures& f) {
  const int64_t tokens_per_step =
      config_.batch_size * config_.block_size * config_.gradient_accumulation_steps;
  const double tokens_per_sec = tokens_per_step / std::max(f.seconds, 1e-9);
  const double loss_avg = state_->LossAverage();
  const std::vector<double>& terms = step_->terms();
  events_->Metric(step, protocol::kTrainLoss, f.loss);
  if (config_.per_loop_loss || config_.norm_penalty > 0) {
    events_->Metric(step, protocol::kTrainObjective, terms.front());
  }
  if (config_.per_loop_loss) {
    for (size_t k = 1; k < terms.size(); ++k) {
      events_->Metric(step, protocol::LoopLossMetricName(static_cast<int64_t>(k)), terms[k]);
    }
  }
  events_->Metric(step, protocol::kTrainLossAvg, loss_avg);
  events_->Metric(step, protocol::kTrainLossSpikes, static_cast<double>(state_->loss_spikes));
  events_->Metric(step, protocol::kLearningRate, f.lr);
  events_->Metric(step, protocol::kGradNorm, f.grad_norm);
  events_->Metric(step, protocol::kTokensPerSec, tokens_per_sec);
  const int64_t done = step + 1 - first, left = config_.max_iters - step - 1;
  char line[160];
  std::snprintf(line, sizeof(line),
                "step %lld/%lld | loss %.4f (avg %.4f) | lr %.2e | %.0f tok/s | eta %s",
                static_cast<long long>(step + 1), static_cast<long long>(config_.max_iters), f.loss,
                loss_avg, f.lr, tokens_per_sec, FormatDuration(f.elapsed / done * left).c_str());
  *log_ << line << std::endl;
}

}  // namespace spheret::train
