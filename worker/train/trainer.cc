#include "worker/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "base/status_macros.h"
#include "protocol/trainer_events.h"
#include "worker/train/run.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr size_t kLossWindow = 200;   // train/loss_avg: mean of the last 200 step losses.
constexpr size_t kSpikeContext = 10;  // losses before a step that make a mean to spike above

std::string FormatDuration(double seconds) {
  char text[32];
  const auto s = static_cast<long>(seconds + 0.5);
  std::snprintf(text, sizeof(text), "%ld:%02ld", s / 60, s % 60);
  return text;
}

// Stops recording into a run's history on every way out of Train (return or exception).
class HistoryRegistration {
 public:
  explicit HistoryRegistration(EventWriter* events) : events_(events) {}
  ~HistoryRegistration() { events_->RecordTo(nullptr); }
  HistoryRegistration(const HistoryRegistration&) = delete;
  HistoryRegistration& operator=(const HistoryRegistration&) = delete;

 private:
  EventWriter* events_;
};

}  // namespace

absl::Status Run::Evaluate(int64_t step, bool at_end) {
  PrepareGates(step);  // evaluation sees this step's AutoNorm gates
  const std::vector<double> exits = EstimateLosses(val_, step);
  state_.val_loss = exits.back();
  events_->Metric(step, protocol::kValLoss, state_.val_loss);
  events_->Metric(step, protocol::kValPpl, std::exp(state_.val_loss));
  for (size_t k = 0; exits.size() > 1 && k < exits.size(); ++k) {
    const auto loop = static_cast<int64_t>(k + 1);
    events_->Metric(step, protocol::ValLoopLossMetricName(loop), exits[k]);
    events_->Metric(step, protocol::ValLoopPplMetricName(loop), std::exp(exits[k]));
  }
  *log_ << "step " << step << ": val loss " << state_.val_loss << std::endl;
  if (step > 0 && (step % config_.checkpoint_interval == 0 || at_end)) {
    SPHERET_RETURN_IF_ERROR(Checkpoint());
    if (rank_ == 0 && options_.after_checkpoint) options_.after_checkpoint(step);
  }
  return absl::OkStatus();
}

void Run::LogStep(int64_t step, int64_t first, double step_loss, double lr, double grad_norm,
                  double seconds, double elapsed) {
  const int64_t tokens_per_step =
      config_.batch_size * config_.block_size * config_.gradient_accumulation_steps;
  const double tokens_per_sec = tokens_per_step / std::max(seconds, 1e-9);
  const double loss_avg = state_.LossAverage();
  events_->Metric(step, protocol::kTrainLoss, step_loss);
  if (config_.per_loop_loss || config_.norm_penalty > 0) {
    events_->Metric(step, protocol::kTrainObjective, step_terms_.front());
  }
  if (config_.per_loop_loss) {
    for (size_t k = 1; k < step_terms_.size(); ++k) {
      events_->Metric(step, protocol::LoopLossMetricName(static_cast<int64_t>(k)), step_terms_[k]);
    }
  }
  events_->Metric(step, protocol::kTrainLossAvg, loss_avg);
  events_->Metric(step, protocol::kTrainLossSpikes, static_cast<double>(state_.loss_spikes));
  events_->Metric(step, protocol::kLearningRate, lr);
  events_->Metric(step, protocol::kGradNorm, grad_norm);
  events_->Metric(step, protocol::kTokensPerSec, tokens_per_sec);
  const int64_t done = step + 1 - first, left = config_.max_iters - step - 1;
  char line[160];
  std::snprintf(
      line, sizeof(line), "step %lld/%lld | loss %.4f (avg %.4f) | lr %.2e | %.0f tok/s | eta %s",
      static_cast<long long>(step + 1), static_cast<long long>(config_.max_iters), step_loss,
      loss_avg, lr, tokens_per_sec, FormatDuration(elapsed / done * left).c_str());
  *log_ << line << std::endl;
}

void Run::MaybeEmitDiagnostics(int64_t step) {
  const bool geometry = config_.diag_interval > 0 && step % config_.diag_interval == 0;
  const bool jacobian = config_.jacobian_interval > 0 && step % config_.jacobian_interval == 0;
  if (!geometry && !jacobian) return;
  PrepareGates(step);  // the diag forward sees this step's gates
  EmitDiagnostics(step, geometry, jacobian);
}

TrainResult Run::Loop(bool resumed) {
  TrainResult result;
  const ScheduleOptions schedule = Schedule();
  const Clock::time_point start = Clock::now();
  const int64_t first = state_.step;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  for (int64_t step = first;; ++step) {
    const bool at_end = step >= config_.max_iters;
    // A resumed run already evaluated and checkpointed at its first step before it stopped.
    if (!(resumed && step == first) && (step % config_.eval_interval == 0 || at_end)) {
      result.status = Evaluate(step, at_end);
      if (!result.status.ok()) return result;
    }
    if (at_end) break;
    MaybeEmitDiagnostics(step);
    const double lr = LearningRate(step, schedule);
    const Clock::time_point step_start = Clock::now();
    double grad_norm = 0;
    const double step_loss = TrainStep(step, lr, &grad_norm);
    state_.step = step + 1;
    // A spike: the loss above the mean of the (at least 10) steps before it by spike_margin.
    if (state_.loss_window.size() >= kSpikeContext &&
        step_loss > state_.LossAverage() + config_.spike_margin) {
      ++state_.loss_spikes;
    }
    state_.loss_window.push_back(step_loss);
    if (state_.loss_window.size() > kLossWindow) {
      state_.loss_window.erase(state_.loss_window.begin());
    }
    result.train_loss_avg = state_.LossAverage();
    result.steps = state_.step;
    if (!std::isfinite(step_loss) || step_loss > config_.divergence_loss) {
      events_->Emit(protocol::DivergedEvent{step, step_loss, config_.divergence_loss});
      *log_ << "step " << step << ": loss " << step_loss << " diverged" << std::endl;
      result.outcome = TrainOutcome::kDiverged;
      return result;
    }
    if (step % config_.log_interval == 0) {
      LogStep(step, first, step_loss, lr, grad_norm, seconds_since(step_start),
              seconds_since(start));
    }
    if (StopRequested()) {
      *log_ << "step " << state_.step << ": stop requested, checkpointing" << std::endl;
      result.status = Checkpoint();
      if (!result.status.ok()) return result;
      events_->Emit(protocol::StoppedEvent{state_.step});
      result.outcome = TrainOutcome::kStopped;
      return result;
    }
  }
  result.steps = state_.step;
  result.train_loss_avg = state_.LossAverage();
  result.val_loss = state_.val_loss;
  events_->Emit(protocol::DoneEvent{result.steps, result.train_loss_avg, result.val_loss,
                                    std::exp(result.val_loss)});
  result.outcome = TrainOutcome::kDone;
  return result;
}

nn::GptConfig ModelConfig(const TrainConfig& config, int64_t vocab_size) {
  nn::GptConfig gpt;
  gpt.vocab_size = vocab_size;
  gpt.block_size = config.block_size;
  gpt.n_layer = config.n_layer;
  gpt.n_head = config.n_head;
  gpt.n_embd = config.n_embd;
  gpt.dropout = config.dropout;
  gpt.bias = config.bias;
  gpt.pos_encoding = config.pos_encoding;
  gpt.connection = config.connection;
  gpt.loops = config.loops;
  gpt.per_loop_loss = config.per_loop_loss;
  if (config.per_loop_loss) gpt.loop_loss_weights = LoopLossWeights(config);
  gpt.norm_penalty = config.norm_penalty;
  gpt.inter_loop_norm = config.inter_loop_norm;
  return gpt;
}

std::string ResolveDatasetDir(const TrainConfig& config) {
  std::error_code ec;
  if (fs::is_directory(config.dataset, ec)) return config.dataset;
  return (fs::path(config.data_root) / config.dataset).string();
}

absl::Status CompareStepTimes(const std::vector<TrainConfig>& configs, int64_t warmup,
                              int64_t steps, const std::string& scratch_dir,
                              std::vector<double>* median_seconds) {
  std::ostream quiet(nullptr);
  EventWriter no_events(&quiet);
  std::vector<TrainOptions> options(configs.size());
  std::vector<std::unique_ptr<Run>> runs;
  for (size_t i = 0; i < configs.size(); ++i) {
    options[i].out_dir = scratch_dir + "/" + std::to_string(i);
    runs.push_back(std::make_unique<Run>(configs[i], options[i], &no_events, &quiet));
    SPHERET_RETURN_IF_ERROR(runs.back()->Open());
  }
  std::vector<std::vector<double>> seconds(configs.size());
  for (int64_t step = 0; step < warmup + steps; ++step) {
    // The order rotates: the first of a round runs measurably slower (measured: ~3% with nine
    // copies of one config), so every run takes every place equally often.
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(step)) % runs.size();
      const double s = runs[i]->TimedStep(step);
      if (step >= warmup) seconds[i].push_back(s);
    }
  }
  median_seconds->clear();
  for (std::vector<double>& s : seconds) {
    std::sort(s.begin(), s.end());
    median_seconds->push_back(s.empty() ? 0.0 : s[s.size() / 2]);
  }
  return absl::OkStatus();
}

TrainResult Train(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
                  std::ostream* log) {
  Run run(config, options, events, log);
  // The history dies with `run`; the writer lives on (spheret-lm writes its error through it).
  const HistoryRegistration registration(events);
  TrainResult result;
  try {
    bool resumed = false;
    result.status = run.Open();
    if (result.status.ok()) result.status = run.Resume(&resumed);
    if (result.status.ok()) result.status = run.StartHistory(resumed);
    if (!result.status.ok()) return result;
    return run.Loop(resumed);
  } catch (const std::exception& e) {  // LibTorch (a bad index, out of memory), data errors
    result = TrainResult{};
    result.status = absl::InternalError(ExceptionMessage(e));
  } catch (...) {
    result = TrainResult{};
    result.status = absl::InternalError("unknown exception in the training loop");
  }
  return result;
}

}  // namespace spheret::train
