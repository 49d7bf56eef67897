// Hugging Face GPT-2 interop: `spheret-lm export --format hf-gpt2` writes a run's model as the
// folder `transformers.GPT2LMHeadModel.from_pretrained` and lm-evaluation-harness's `hf` backend
// load (config.json, model.safetensors in GPT-2's Conv1D layout, and the GPT-2 tokenizer's files
// when the run's data set is GPT-2 BPE), and `init_from: hf-gpt2:DIR` starts a run from such a
// folder (nanoGPT's init_from='gpt2', from a local folder).
//
// The names: wte, wpe, h.L.ln_1, h.L.attn.c_attn, h.L.attn.c_proj, h.L.ln_2, h.L.mlp.c_fc,
// h.L.mlp.c_proj, ln_f (under "transformer."; read with or without it); the Conv1D weights are
// spheret's Linear weights transposed. GPT-2's activation is written as "gelu" (the exact erf GELU
// that nanoGPT and spheret use), so transformers computes the same function.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/train_config.h"
#include "worker/nn/gpt.h"

namespace spheret::train {

inline constexpr char kHfGpt2Prefix[] = "hf-gpt2:";

// The shape of a GPT-2 folder's config.json.
struct HfGpt2Shape {
  int64_t vocab_size = 0, n_positions = 0, n_embd = 0, n_layer = 0, n_head = 0;
};

// One of spheret's parameters and its GPT-2 name; GPT-2's Conv1D weights are the transpose.
struct Gpt2Name {
  std::string ours, hf;
  bool transpose = false;
};
// The GPT-2 name of every parameter of a pre_ln model with `n_layer` blocks, in GPT-2's order.
// With `norms` false the blocks' ln_1/ln_2 are left out (methods whose connections hold other
// parameters).
std::vector<Gpt2Name> Gpt2Names(int64_t n_layer, bool norms);

// OK when the run's architecture is GPT-2's: pre_ln, bias, learned positions, one loop, LayerNorm
// final norm, no embedding norm; else FailedPrecondition naming the first difference and why
// GPT-2 cannot hold it.
absl::Status CheckGpt2Architecture(const TrainConfig& config);

struct HfExportReport {
  int64_t step = 0, tensors = 0, parameters = 0;
  bool tokenizer = false;    // the GPT-2 tokenizer's files were written
  std::string no_tokenizer;  // else why not
};
// Writes RUN's latest checkpoint to `out_dir` (created) as a GPT-2 folder. Refuses an `out_dir`
// that holds a run (ckpt.pt) or another model's config.json, so an export never overwrites one.
absl::Status ExportHfGpt2(const std::string& run_dir, const std::string& out_dir,
                          HfExportReport* report);

// The folder of config.init_from ("hf-gpt2:DIR"): DIR itself when it is a folder under
// data_root, else data_root/DIR (resolved on the worker, like a data set). InvalidArgument
// naming DIR and the root when that leaves data_root, "../../etc" or "/etc"
// (base/path_under_root.h).
absl::StatusOr<std::string> ResolveInitFromDir(const TrainConfig& config);
// Reads DIR/config.json; InvalidArgument naming the file and the field, also for a setting that
// makes GPT-2 compute another function than spheret's pre_ln (an activation other than gelu or
// gelu_new, layer_norm_epsilon other than 1e-5, unscaled or layer-scaled attention).
absl::Status ReadHfGpt2Shape(const std::string& dir, HfGpt2Shape* shape);
// With init_from set: n_layer, n_head, n_embd, vocab_size and block_size come from the folder's
// config.json (block_size may be given smaller: wpe's first rows are kept, as nanoGPT's
// crop_block_size). A shape key given explicitly with another value is refused, naming both.
absl::Status ApplyInitFromShape(TrainConfig* config);
// Copies the folder's weights into `model` (pre_ln: every tensor; other methods: the embeddings,
// attention and MLP weights, ln_f when the final norm is a LayerNorm, and the connections start
// at their defaults). `log` gets what was loaded and what was not.
absl::Status LoadHfGpt2Weights(const std::string& dir, const TrainConfig& config,
                               nn::GptImpl& model, std::ostream& log);

}  // namespace spheret::train
