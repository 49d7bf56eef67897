// The configuration of one training run: nanoGPT's knob names and semantics plus the model knobs
// of docs/methods.md. Read from a JSON object and `key=value` overrides; every key is known, so a
// typo is refused with the key named.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/connection_options.h"

namespace spheret {

struct TrainConfig {
  // Data: a prepared folder's path, or a name under data_root.
  std::string dataset = "fortunes";
  std::string data_root = "data";
  // Start from a model's weights instead of a random init: "hf-gpt2:DIR", a Hugging Face GPT-2
  // folder (config.json, model.safetensors; a path, or a name under data_root), as nanoGPT's
  // init_from='gpt2'. Its shape fills n_layer/n_head/n_embd/vocab_size/block_size
  // (worker/train/hf_gpt2.h). "" = random init.
  std::string init_from;
  // Model. `scale` (a preset name) sets n_layer/n_head/n_embd, except those given explicitly
  // (through ApplyConfigJson or an override): an explicit shape key wins over the preset.
  int64_t vocab_size = 0;  // 0: the dataset's (meta.json; GPT-2's 50304 without one).
  std::string scale;
  // A named set of training settings (config/recipes.h: "paper" = the paper's Appendix B per
  // scale); it fills the keys not given explicitly. "" = none.
  std::string recipe;
  int64_t n_layer = 12, n_head = 12, n_embd = 768;
  int64_t block_size = 1024;
  double dropout = 0.0;
  bool bias = true;
  // Each connection's update (residual add or sphere update) fused with the LayerNorm after it on
  // the CPU (worker/nn/norm_fused.h); false runs the two ops apart, the same map up to rounding.
  bool fused_norm = true;
  // Causal attention as one function from the packed q, k, v on the CPU when training (fp32/fp64,
  // block_size <= 256, no dropout, no rope, not ngpt: worker/nn/attention_fused.h); false runs
  // LibTorch's scaled_dot_product_attention, the same map up to rounding, as evaluation does.
  bool fused_attention = true;
  // The MLP's bias add and exact GELU as one function on the CPU (fp32 with AVX-512:
  // worker/nn/gelu_fused.h); false runs c_fc with its bias, then torch::gelu.
  bool fused_mlp = true;
  // Positions: nanoGPT's learned wpe, or rotary embeddings on q and k (ngpt's default, as nGPT).
  PosEncoding pos_encoding = PosEncoding::kLearned;
  ConnectionOptions connection;  // method, p, angle_max, decay, ... (docs/methods.md)
  // Method `scripted` (config/connection_script.h): the TorchScript file of the connection (key
  // `connection`: a path, or a name under data_root), the SHA-256 it must have ("" = any; the
  // trainer sets it to the loaded file's), and the file itself as base64 (what the coordinator
  // sends; when set, no file is read). ConfigToJson leaves connection_script out: the hash names
  // it.
  std::string connection_file, connection_sha256, connection_script;
  // Optimization (nanoGPT defaults).
  double learning_rate = 6e-4, min_lr = 6e-5;
  int64_t warmup_iters = 2000, lr_decay_iters = 600000, max_iters = 600000;
  bool decay_lr = true;
  int64_t batch_size = 12, gradient_accumulation_steps = 40;
  // CPU: each micro-batch runs as this many row shards on concurrent threads (worker/train/
  // shard_pool.h). 0 = one shard per intra-op thread up to batch_size (1 on CUDA or with dropout).
  int64_t batch_shards = 0;
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, grad_clip = 1.0;
  // Evaluation and logging.
  int64_t eval_interval = 2000, eval_iters = 200, log_interval = 1;
  int64_t diag_interval = 0;  // Per-layer geometry every N steps; 0 = never.
  // Checkpoint every N steps (at an evaluation) and at the end; 0 = at every evaluation.
  int64_t checkpoint_interval = 0;
  double divergence_loss = 100.0;  // A train loss above this (or NaN/inf) ends the run as diverged.
  // A loss spike: a step whose train loss exceeds the mean of the previous 200 by this much
  // (nats); counted as train/loss_spikes.
  double spike_margin = 0.5;
  int64_t seed = 1337;
  // "cpu", "cuda" (cuda:LOCAL_RANK under data parallelism) or "cuda:N".
  std::string device = "cpu";
  // Zero-shot evaluation of the run's checkpoints (spheret-lm eval): a comma list of the tasks of
  // ZeroShotTaskNames() ("" = none), the folder of their JSONL files (a path, or a name under
  // data_root), and when: "final" (after the last step) or "checkpoints" (at every checkpoint).
  std::string eval_tasks;
  std::string eval_data;
  std::string eval_every = "final";
  // Looped models (docs/methods.md §3): the stack of n_layer blocks runs `loops` times with the
  // same weights (n_layer x loops deep). per_loop_loss trains on the sum of every loop's readout
  // cross-entropy, weighted by loop_loss_weights (a comma list, one weight per loop; "" = all 1).
  // `readout` sets the norm before the head: layernorm, rmsnorm, or scale_visible (none); "" =
  // final_norm's. norm_penalty adds lambda * mean over loops and tokens of (ln ||h_k|| - ln
  // ||h_0||)^2, the drift of the hidden-state norm from the stack's input.
  int64_t loops = 1;
  bool per_loop_loss = false;
  std::string loop_loss_weights;
  std::string readout;
  double norm_penalty = 0.0;
  // Between loop k and k + 1 (loops >= 2): none (the default, the plain looped model), a learned
  // layernorm or rmsnorm shared by every boundary, or sphere: h -> ||h_0|| h / ||h|| per token.
  // (AutoNorm's autonorm_mode is a connection knob: connection.autonorm_mode.)
  InterLoopNorm inter_loop_norm = InterLoopNorm::kNone;
  // AutoNorm's gate: the Gumbel-softmax temperature falls geometrically from gate_temp_start to
  // gate_temp_end over the steps before gate_freeze_step (or lr_decay_iters, the schedule's
  // horizon, so a shorter run of a schedule trains as its prefix); at gate_freeze_step > 0
  // (AutoNorm-S) each gate freezes to its argmax.
  double gate_temp_start = 1.0, gate_temp_end = 0.1;
  int64_t gate_freeze_step = 0;
  // The update and end-to-end Jacobians every N steps (0 = never), in fp64: jacobian_iters
  // Golub-Kahan-Lanczos steps per estimate (sigma_min certified from below only once they reach
  // block_size * n_embd; worker/nn/jacobian.h).
  int64_t jacobian_interval = 0, jacobian_iters = 20;
  // "float32", or "bfloat16": bf16 autocast of the forward on CUDA (weights and optimizer in fp32).
  std::string dtype = "float32";
  // The keys ApplyConfigJson set (not a knob itself; FinalizeConfig reads it for `scale`).
  std::set<std::string> explicit_keys;
};

// Applies the keys of `json` (an object) to `config`. InvalidArgument naming the key:
// "unknown config key 'lerning_rate'", "config key 'p' must be a number, got \"x\"", ...
absl::Status ApplyConfigJson(const nlohmann::json& json, TrainConfig* config);
// Applies one "key=value" override (value parsed as JSON when it parses, else as a string).
absl::Status ApplyConfigOverride(const std::string& assignment, TrainConfig* config);
// Resolves `recipe` (filling the keys not set explicitly), then `scale` (explicit
// n_layer/n_head/n_embd win over the preset) and checks every knob's range before anything divides
// by it or allocates from it; InvalidArgument naming the key and the valid range.
absl::Status FinalizeConfig(TrainConfig* config);
// Every key with its value, as written to events and checkpoints.
nlohmann::json ConfigToJson(const TrainConfig& config);
// One key's value as ConfigToJson writes it (null for an unknown key), without building the rest.
nlohmann::json ConfigValue(const TrainConfig& config, const std::string& key);
std::vector<std::string> ConfigKeys();
// The weight of each loop's readout loss: loop_loss_weights parsed, or `loops` ones.
// Precondition: FinalizeConfig accepted the config.
std::vector<double> LoopLossWeights(const TrainConfig& config);
// The zero-shot tasks spheret-lm eval knows (worker/eval/tasks.h has their definitions).
const std::vector<std::string>& ZeroShotTaskNames();
// The folder of config.eval_data: the path itself when it is a folder under data_root, else
// data_root/eval_data; InvalidArgument naming the path and the root when that leaves data_root
// (base/path_under_root.h).
absl::StatusOr<std::string> ResolveEvalDataDir(const TrainConfig& config);

}  // namespace spheret
