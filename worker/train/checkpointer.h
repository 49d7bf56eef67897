// The run folder of a run: its config.json, its checkpoint (saved at step boundaries with the
// model, the optimizer, both generators and TrainState; loaded on resume) and its event history
// OUT/events.jsonl (trimmed to the resume step, replayed when asked, synced before each save).
// Only rank 0 writes.
#pragma once

#include <cstdint>
#include <ostream>

#include "absl/status/status.h"
#include "config/train_config.h"
#include "worker/train/event_history.h"
#include "worker/train/events.h"

namespace spheret::train {

class ShardedModel;
class TrainData;
class TrainStep;
struct TrainOptions;
struct TrainState;

class Checkpointer {
 public:
  // None of the pointers is owned; all outlive the checkpointer.
  Checkpointer(const TrainConfig& config, const TrainOptions& options, int rank,
               EventWriter* events, std::ostream* log, TrainState* state, ShardedModel* model,
               TrainStep* step, TrainData* data)
      : config_(config),
        options_(options),
        rank_(rank),
        events_(events),
        log_(log),
        state_(state),
        model_(model),
        step_(step),
        data_(data) {}

  // Creates the run folder, puts the run's config (with the resolved `vocab_size`, so config.json
  // rebuilds the model) and its data set's identity into the state and, on rank 0, writes
  // config.json.
  absl::Status WriteConfig(int64_t vocab_size);
  // Loads OUT/checkpoint when resuming and one exists (*resumed says whether): model, optimizer,
  // the data and dropout generators and the state. FailedPrecondition naming both data sets when
  // the checkpoint trained on another one (CheckSameDataset); a checkpoint that records none (an
  // older spheret's) resumes with a warning in the log.
  absl::Status Resume(bool* resumed);
  // Rank 0: starts OUT/events.jsonl (trimmed to the resume step), replaying it when asked, and
  // records the events into it from then on.
  absl::Status StartHistory(bool resumed);
  // Rank 0: syncs the history, saves the checkpoint and emits its event.
  absl::Status Save();

 private:
  const TrainConfig& config_;
  const TrainOptions& options_;
  const int rank_;
  EventWriter* events_;
  std::ostream* log_;
  TrainState* state_;
  ShardedModel* model_;
  TrainStep* step_;
  TrainData* data_;
  EventHistory history_;
};

}  // namespace spheret::train
