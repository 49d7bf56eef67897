// The evaluation of a run: each exit's mean loss over eval_iters batches of the val file, drawn
// from the step's own side stream and computed over the batch shards without gradients, written
// as the val metrics (val/loss, val/ppl and, looped, each loop's) and a log line.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "config/train_config.h"
#include "worker/train/events.h"

namespace spheret::train {

class GateSchedule;
class ShardedModel;
class TrainData;

class Evaluator {
 public:
  // None of the pointers is owned.
  Evaluator(const TrainConfig& config, ShardedModel* model, const TrainData* data,
            GateSchedule* gates, EventWriter* events, std::ostream* log)
      : config_(config), model_(model), data_(data), gates_(gates), events_(events), log_(log) {}

  // Evaluates at `step` under its AutoNorm gates, emits the val metrics and logs the loss;
  // returns val/loss (the last exit's).
  double Evaluate(int64_t step);

 private:
  // The mean loss of each exit (loops; 1 unlooped, the last is the model's loss) over eval_iters
  // val batches drawn from a generator seeded by the step.
  std::vector<double> EstimateLosses(int64_t step);

  const TrainConfig& config_;
  ShardedModel* model_;
  const TrainData* data_;
  GateSchedule* gates_;
  EventWriter* events_;
  std::ostream* log_;
};

}  // namespace spheret::train
