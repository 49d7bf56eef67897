// The cross-key checks of FinalizeConfig (config/train_config.h), one group of related knobs
// each. Internal to spheret_config; every message names the key and what would be valid.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "config/train_config.h"

namespace spheret {

// The ranges of the numeric knobs, checked by CheckRanges (docs/security.md lists them). The sizes
// keep products such as batch_size x block_size x gradient_accumulation_steps inside int64; the
// real-valued knobs stop where a larger value is a mistake, not a setting (a learning_rate of
// 1e308 or a grad_clip of 7e307 passed once, and trained on infinities).
inline constexpr int64_t kMaxHeads = 1024;               // n_layer and n_head: [1, kMaxHeads]
inline constexpr int64_t kMaxEmbd = 65536;               // n_embd: [1, kMaxEmbd]
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;   // vocab_size: [0, kMaxVocab]
inline constexpr int64_t kMaxBatch = int64_t{1} << 20;   // block_size, batch_size, ... (below)
inline constexpr int64_t kMaxSteps = 1'000'000'000'000;  // every count or interval of steps
inline constexpr int64_t kMaxLoops = 64;                 // loops: [1, kMaxLoops]
inline constexpr int64_t kMaxStackDepth = 4096;          // n_layer x loops
inline constexpr int64_t kMaxJacobianIters = 10000;      // jacobian_iters: [1, kMaxJacobianIters]
inline constexpr double kMaxLearningRate = 10;           // learning_rate (0, 10], min_lr [0, 10]
inline constexpr double kMaxWeightDecay = 10;            // weight_decay: [0, 10]
inline constexpr double kMaxGradClip = 1e6;              // grad_clip: [0, 1e6], 0 = no clipping
inline constexpr double kMaxLossBound = 1e9;             // divergence_loss, spike_margin: (0, 1e9]
inline constexpr double kMaxNormPenalty = 1e3;           // norm_penalty: [0, 1e3]
inline constexpr double kMinGateTemp = 1e-3;             // gate_temp_start, gate_temp_end:
inline constexpr double kMaxGateTemp = 1e3;              //   [kMinGateTemp, kMaxGateTemp]
inline constexpr double kMaxP = 64;                      // p: (0, 64]
inline constexpr double kMaxAlphaInit = 1e3;             // ngpt_alpha_init: (0, 1e3]

// Every numeric knob within its range above (dropout, beta1 and beta2 in [0, 1); seed >= 0; NaN
// never), before anything divides by a knob or allocates from one: InvalidArgument "config key
// 'learning_rate' must be in (0, 10], got 1e+308".
absl::Status CheckRanges(const TrainConfig& c);

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
