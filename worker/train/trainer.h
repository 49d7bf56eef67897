// The training loop of spheret-lm: nanoGPT's train.py, on one process or data-parallel over c10d
// ranks (Gloo on CPU, NCCL on CUDA; TrainOptions::communicator), writing events.
//
// Per step: nanoGPT's learning rate, gradient_accumulation_steps micro-batches of random windows,
// global-norm clipping, AdamW with decay on dim >= 2 parameters only. Metrics every log_interval
// steps (train/loss, train/loss_avg = mean of the last 200 step losses, lr, grad_norm,
// tokens_per_sec), val/loss and val/ppl every eval_interval steps and at the end, diag every
// diag_interval steps, a checkpoint (and its event) every checkpoint_interval steps and at the end.
// Progress goes to `log` (stderr), events to `events` (stdout).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/train_config.h"
#include "worker/nn/gpt.h"
#include "worker/train/communicator.h"
#include "worker/train/events.h"

namespace spheret::train {

// kStopped: `TrainOptions::stop` was raised; the run checkpointed at a step boundary and can be
// resumed exactly.
enum class TrainOutcome { kDone, kDiverged, kStopped, kError };

struct TrainResult {
  TrainOutcome outcome = TrainOutcome::kError;
  absl::Status status;  // Not OK exactly when outcome is kError.
  int64_t steps = 0;    // Optimizer steps taken.
  double train_loss_avg = 0, val_loss = 0;
};

struct TrainOptions {
  std::string out_dir;  // Run folder: config.json and the checkpoint ckpt.pt.
  // Continue from out_dir's checkpoint when there is one. On CPU the losses that follow are
  // bitwise those of an uninterrupted run.
  bool resume = false;
  // The process group for data parallelism (not owned), or nullptr for one process. The global
  // batch stays batch_size x gradient_accumulation_steps: each rank runs its share of the
  // micro-batches (accumulation steps / world size), gradients are averaged across ranks, and only
  // rank 0 writes events, logs, config.json and checkpoints.
  Communicator* communicator = nullptr;
  int local_rank = 0;  // LOCAL_RANK: the GPU of device "cuda" under data parallelism.
  // Raised from outside (spheret-lm: on SIGTERM/SIGINT) to stop after the current step with a
  // checkpoint and a `stopped` event. Under data parallelism the ranks agree on the step (any
  // rank's flag stops all). Not owned; may be null.
  const std::atomic<bool>* stop = nullptr;
  // Rank 0 records every event in out_dir/events.jsonl. On resume, emit that history up to the
  // checkpoint first, so that stdout carries the run's whole curve (spheret-worker uses it when
  // an attempt resumes from another one's checkpoint).
  bool replay_events = false;
  // Called on rank 0 after each scheduled checkpoint (not the one a stop writes) with its step;
  // spheret-lm evaluates zero-shot tasks there (eval_every: checkpoints). May be empty.
  std::function<void(int64_t step)> after_checkpoint = nullptr;
};

// Trains per `config` (already finalized by FinalizeConfig). Never throws: an exception (LibTorch's
// bad index or out of memory, a data set truncated under the run) ends it with outcome kError and
// the exception's message. `events` records into the run's history only while Train runs.
TrainResult Train(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
                  std::ostream* log);

// Step times side by side (`spheret-lm bench`): one run per config (each finalized; say one per
// method), all in this process, a training step of each in turn, so that the slow and fast moments
// of a shared machine fall on all of them alike. Sets each config's median step time in seconds
// over `steps` steps after `warmup`. Run folders go under `scratch_dir`.
absl::Status CompareStepTimes(const std::vector<TrainConfig>& configs, int64_t warmup,
                              int64_t steps, const std::string& scratch_dir,
                              std::vector<double>* median_seconds);

// The GPT of `config` with `vocab_size` tokens.
nn::GptConfig ModelConfig(const TrainConfig& config, int64_t vocab_size);

// The folder of config.dataset: the path itself when it is a folder, else data_root/dataset.
std::string ResolveDatasetDir(const TrainConfig& config);

}  // namespace spheret::train
