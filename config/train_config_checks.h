// The cross-key checks of FinalizeConfig (config/train_config.h), one group of related knobs
// each. Internal to spheret_config; every message names the key and what would be valid.
#pragma once

#include "absl/status/status.h"
#include "config/train_config.h"

namespace spheret {

// The device, precision and batch-sharding knobs, which depend on each other.
absl::Status CheckRuntime(const TrainConfig& c);

// eval_tasks names known tasks, has eval_data, and eval_every is final or checkpoints.
absl::Status CheckZeroShot(const TrainConfig& c);

// init_from is "" or "hf-gpt2:DIR", on a model GPT-2's weights fit: biases, learned positions,
// a tied head (not ngpt).
absl::Status CheckInitFrom(const TrainConfig& c);

// The method's defaults (MethodDefaults in config/recipes.h) for the keys not given explicitly;
// they count as explicit from then on, so a recipe does not override them.
absl::Status ApplyMethodDefaults(TrainConfig* config);

// The looped-model, readout, AutoNorm, Jacobian, nGPT (no bias) and pos_encoding (an even head
// size for rope) keys; folds `readout` into connection.final_norm.
absl::Status CheckRelatedMethods(TrainConfig* config);

}  // namespace spheret
