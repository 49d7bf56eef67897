#include "worker/train/run.h"

#include <chrono>
#include <cmath>

#include "base/status_macros.h"
#include "protocol/trainer_events.h"
#include "worker/nn/linear.h"
#include "worker/train/huge_pages.h"

namespace spheret::train {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

Run::Run(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
         std::ostream* log)
    : config_(config),
      options_(options),
      rank_(options.communicator ? options.communicator->rank() : 0),
      null_stream_(nullptr),
      null_events_(&null_stream_),
      events_(rank_ == 0 ? events : &null_events_),
      log_(rank_ == 0 ? log : &null_stream_),
      data_(config),
      gates_(config, &model_),
      step_(config, options.communicator, &model_, &data_, &gates_),
      evaluator_(config, &model_, &data_, &gates_, events_, log_),
      diagnostics_(config, rank_, &model_, &data_, &gates_, events_),
      checkpointer_(config, options, rank_, events_, log_, &state_, &model_, &step_, &data_),
      step_log_(config, &state_, &step_, events_, log_) {}

absl::Status Run::Open() {
  const int world_size = options_.communicator ? options_.communicator->world_size() : 1;
  SPHERET_ASSIGN_OR_RETURN(const int64_t vocab_size, data_.Open(world_size));
  SPHERET_RETURN_IF_ERROR(checkpointer_.WriteConfig(vocab_size));
  torch::manual_seed(config_.seed);  // the model's initialization (and dropout) draw from it
  SPHERET_RETURN_IF_ERROR(
      model_.Build(config_, vocab_size, options_.local_rank, options_.communicator, log_));
  if (model_.device().is_cpu()) *log_ << "spheret-lm: " << nn::CpuGemmDescription() << std::endl;
  step_.Open();
  return absl::OkStatus();
}

absl::Status Run::Evaluate(int64_t step, bool at_end) {
  state_.val_loss = evaluator_.Evaluate(step);
  // A run of max_iters 0 saves its initial model too (a random init, or its init_from weights).
  if ((step > 0 && step % config_.checkpoint_interval == 0) || at_end) {
    SPHERET_RETURN_IF_ERROR(checkpointer_.Save());
    if (rank_ == 0 && options_.after_checkpoint) options_.after_checkpoint(step);
  }
  return absl::OkStatus();
}

bool Run::StopRequested() {
  const bool local = options_.stop != nullptr && options_.stop->load();
  if (!options_.communicator) return local;
  torch::Tensor flag =
      torch::full({}, local ? 1.0 : 0.0, torch::TensorOptions().device(model_.device()));
  options_.communicator->AllReduceMean({flag});
  return flag.item<double>() > 0;
}

TrainResult Run::Stop(TrainResult result) {
  *log_ << "step " << state_.step << ": stop requested, checkpointing" << std::endl;
  result.status = checkpointer_.Save();
  if (!result.status.ok()) return result;
  events_->Emit(protocol::StoppedEvent{state_.step});
  result.outcome = TrainOutcome::kStopped;
  return result;
}

TrainResult Run::Loop(bool resumed) {
  TrainResult result;
  const Clock::time_point start = Clock::now();
  const int64_t first = state_.step;
  for (int64_t step = first;; ++step) {
    const bool at_end = step >= config_.max_iters;
    // A resumed run already evaluated and checkpointed at its first step before it stopped.
    if (!(resumed && step == first) && (step % config_.eval_interval == 0 || at_end)) {
      result.status = Evaluate(step, at_end);
      if (!result.status.ok()) return result;
    }
    if (at_end) break;
    diagnostics_.MaybeEmit(step);
    StepFigures figures;
    figures.lr = step_.LearningRate(step);
    const Clock::time_point step_start = Clock::now();
    figures.loss = step_.Take(step, figures.lr, &figures.grad_norm);
    state_.step = step + 1;
    step_log_.Record(figures.loss);
    result.train_loss_avg = state_.LossAverage();
    result.steps = state_.step;
    if (!std::isfinite(figures.loss) || figures.loss > config_.divergence_loss) {
      events_->Emit(protocol::DivergedEvent{step, figures.loss, config_.divergence_loss});
      *log_ << "step " << step << ": loss " << figures.loss << " diverged" << std::endl;
      result.outcome = TrainOutcome::kDiverged;
      return result;
    }
    if (step % config_.log_interval == 0) {
      figures.seconds = SecondsSince(step_start);
      figures.elapsed = SecondsSince(start);
      step_log_.Write(step, first, figures);
    }
    // By now the heap holds the working set: the evaluation's and two steps' buffers.
    if (step == first + 1 && WorthHugePages(config_.max_iters - first)) BackHeapWithHugePages();
    if (StopRequested()) return Stop(result);
  }
  result.steps = state_.step;
  result.train_loss_avg = state_.LossAverage();
  result.val_loss = state_.val_loss;
  events_->Emit(protocol::DoneEvent{result.steps, result.train_loss_avg, result.val_loss,
                                    std::exp(result.val_loss)});
  result.outcome = TrainOutcome::kDone;
  return result;
}

double Run::TimedStep(int64_t step) {
  const double lr = step_.LearningRate(step);
  const Clock::time_point start = Clock::now();
  double grad_norm = 0;
  step_.Take(step, lr, &grad_norm);
  diagnostics_.MaybeEmit(step);  // as the training loop does: bench prices diag_interval too
  const double seconds = SecondsSince(start);
  // As a training run long enough to pay for it (bench times the steady state), untimed.
  if (step == 1) BackHeapWithHugePages();
  return seconds;
}

}  // namespace spheret::train
