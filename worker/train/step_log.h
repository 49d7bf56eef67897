// What a run says about its training steps: the loss window and spike count it keeps in
// TrainState (train/loss_avg, train/loss_spikes), and, every log_interval steps, the train
// metrics (loss, objective and loop losses, loss_avg, spikes, lr, grad_norm, tokens_per_sec) and
// the progress line with its ETA.
#pragma once

#include <cstdint>
#include <ostream>

#include "config/train_config.h"
#include "worker/train/events.h"

namespace spheret::train {

class TrainStep;
struct TrainState;

// The figures of one step, as the loop measured them.
struct StepFigures {
  double loss = 0;       // the step's loss (the last readout's CE)
  double lr = 0;         // its learning rate
  double grad_norm = 0;  // before clipping
  double seconds = 0;    // its wall time
  double elapsed = 0;    // wall time since the loop's first step
};

class StepLog {
 public:
  // None of the pointers is owned.
  StepLog(const TrainConfig& config, TrainState* state, const TrainStep* step, EventWriter* events,
          std::ostream* log)
      : config_(config), state_(state), step_(step), events_(events), log_(log) {}

  // Counts a spike (the loss above the mean of the at least 10 steps before it by spike_margin)
  // and adds the loss to the window of the last 200.
  void Record(double step_loss);
  // The metrics and the progress line of `step`; `first` is the loop's first step (the ETA).
  void Write(int64_t step, int64_t first, const StepFigures& figures);

 private:
  const TrainConfig& config_;
  TrainState* state_;
  const TrainStep* step_;
  EventWriter* events_;
  std::ostream* log_;
};

}  // namespace spheret::train
