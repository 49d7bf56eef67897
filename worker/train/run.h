// The training run behind Train and CompareStepTimes (internal to spheret_train): the loop that
// wires a run's collaborators, one job each: TrainData (token files, batches), ShardedModel (the
// GPT, its device and batch shards), GateSchedule (AutoNorm's gates), TrainStep (one optimizer
// step), Evaluator (val losses), Diagnostics (diag rows), Checkpointer (run folder, checkpoint,
// event history) and StepLog (train metrics and progress line).
#pragma once

#include <cstdint>
#include <ostream>

#include "absl/status/status.h"
#include "worker/train/checkpoint.h"
#include "worker/train/checkpointer.h"
#include "worker/train/diagnostics.h"
#include "worker/train/evaluator.h"
#include "worker/train/gate_schedule.h"
#include "worker/train/sharded_model.h"
#include "worker/train/step_log.h"
#include "worker/train/train_data.h"
#include "worker/train/train_step.h"
#include "worker/train/trainer.h"

namespace spheret::train {

class Run {
 public:
  // None of the pointers is owned; all outlive the run. Ranks other than 0 write no events and
  // no log.
  Run(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
      std::ostream* log);

  // Opens the data set, writes config.json and builds the model and its optimizer.
  absl::Status Open();
  // Loads OUT/checkpoint when resuming and one exists (*resumed says whether).
  absl::Status Resume(bool* resumed) { return checkpointer_.Resume(resumed); }
  // Rank 0: starts OUT/events.jsonl (trimmed to the resume step), replaying it when asked.
  absl::Status StartHistory(bool resumed) { return checkpointer_.StartHistory(resumed); }
  TrainResult Loop(bool resumed);
  // One training step at `step`'s learning rate (and its diagnostics); returns its wall time in
  // seconds.
  double TimedStep(int64_t step);

 private:
  // The evaluation at `step`, and the checkpoint (with after_checkpoint) that follows it at
  // checkpoint_interval steps and at the end.
  absl::Status Evaluate(int64_t step, bool at_end);
  // Whether options_.stop is raised on any rank (a collective under data parallelism).
  bool StopRequested();
  // The end of a run stopped after `state_.step` steps: its checkpoint and stopped event.
  TrainResult Stop(TrainResult result);

  const TrainConfig& config_;
  const TrainOptions& options_;
  const int rank_;
  std::ostream null_stream_;  // Ranks other than 0 write nowhere.
  EventWriter null_events_;
  EventWriter* events_;
  std::ostream* log_;
  TrainState state_;
  TrainData data_;
  ShardedModel model_;
  GateSchedule gates_;
  TrainStep step_;
  Evaluator evaluator_;
  Diagnostics diagnostics_;
  Checkpointer checkpointer_;
  StepLog step_log_;
};

}  // namespace spheret::train
