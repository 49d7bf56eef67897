// A finished (or checkpointed) training run folder read back for inference: its config.json, the
// tokenizer of its data set (bytes or GPT-2 BPE) and its model from ckpt.pt. Used by `sample`,
// `eval` and `score`.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/train_config.h"
#include "worker/nn/gpt.h"
#include "worker/text/bpe.h"

namespace spheret::train {

// Applies the config file at `path` (a trial's JSON config: `--config`, a run's config.json) to
// `config` as TrialConfig::ApplyTo does. The one place the trainer process turns a config's text
// into its typed value (a checkpoint's saved config, checkpoint.h, is the other road in); every
// command passes the TrainConfig on. InvalidArgument `unreadable` when the file cannot be read,
// else naming the file and the key refused.
absl::Status ApplyConfigFile(const std::string& path, const std::string& unreadable,
                             TrainConfig* config);

// Reads RUN/config.json (ApplyConfigFile), finalized; InvalidArgument naming the file when it is
// missing or not a config.
absl::Status ReadRunConfig(const std::string& run_dir, TrainConfig* config);

// Text <-> token ids of a run's data set: bytes, or GPT-2 BPE from the data set's folder.
struct Codec {
  bool gpt2 = false;
  Gpt2Bpe bpe;

  std::vector<int64_t> Encode(const std::string& text) const;
  std::string Decode(const std::vector<int64_t>& ids) const;
  // The token that stands for "no context": GPT-2's <|endoftext|>, a newline for bytes.
  int64_t PrefixToken() const;
};

// The codec of the run's data set (its meta.json, and encoder.json + vocab.bpe for GPT-2).
// InvalidArgument when the data set cannot be read or its tokenizer cannot encode text.
absl::Status LoadCodec(const TrainConfig& config, Codec* codec);

// The device of `config` for this process (cuda: GPU local_rank); InvalidArgument when it is
// not available.
absl::Status ResolveDevice(const TrainConfig& config, int local_rank, torch::Device* device);

// The intra-op threads the process started with (OMP_NUM_THREADS or the cores), read at the first
// call: a ShardPool lowers the calling thread's setting, and inference after training restores it.
int StartingThreads();

// The run's model with the weights of RUN/ckpt.pt, in eval mode; *step is the checkpoint's.
absl::Status LoadRunModel(const std::string& run_dir, const TrainConfig& config, nn::Gpt* model,
                          int64_t* step);

}  // namespace spheret::train
