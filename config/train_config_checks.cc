#include "config/train_config_checks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/path_under_root.h"
#include "base/text_prefix.h"
#include "config/knob_text.h"
#include "config/recipes.h"

namespace spheret {
namespace {

// The weights of loop_loss_weights, or an error naming the bad item.
absl::Status ParseLoopWeights(const std::string& text, std::vector<double>* weights) {
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    double weight = 0;
    const std::string trimmed(absl::StripAsciiWhitespace(item));
    if (!absl::SimpleAtod(trimmed, &weight) || !std::isfinite(weight) || weight < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("config key 'loop_loss_weights' must be a comma list of numbers >= 0, got '",
                       trimmed, "' in \"", text, "\""));
    }
    weights->push_back(weight);
  }
  return absl::OkStatus();
}

// readout -> the final norm it means.
absl::Status ApplyReadout(TrainConfig* c) {
  if (c->readout.empty()) return absl::OkStatus();
  if (c->connection.method == Method::kNgpt) {
    return absl::InvalidArgumentError(
        "config key 'readout' is not for method ngpt: its hidden state is unit and its logits "
        "carry the scale s_z, with no norm before the head");
  }
  NormKind norm = NormKind::kNone;
  if (c->readout == "layernorm") {
    norm = NormKind::kLayerNorm;
  } else if (c->readout == "rmsnorm") {
    norm = NormKind::kRmsNorm;
  } else if (c->readout != "scale_visible") {
    return absl::InvalidArgumentError(
        "config key 'readout' must be layernorm, rmsnorm or scale_visible, got \"" +
        TextPrefix(c->readout) + "\"");
  }
  if (c->explicit_keys.count("final_norm") != 0 && c->connection.final_norm != norm) {
    return absl::InvalidArgumentError(
        absl::StrCat("config keys 'readout' (", c->readout, ") and 'final_norm' (",
                     std::string(KnobId(c->connection.final_norm)), ") disagree; set one of them"));
  }
  c->connection.final_norm = norm;
  return absl::OkStatus();
}

// autonorm_mode and inter_loop_norm: each where it means something.
absl::Status CheckGateModeAndInterLoopNorm(const TrainConfig& c) {
  if (c.connection.autonorm_mode != AutoNormMode::kLearned &&
      c.connection.method != Method::kAutoNorm) {
    return absl::InvalidArgumentError(
        "config key 'autonorm_mode' is for method autonorm, got method " +
        std::string(MethodId(c.connection.method)));
  }
  if (c.gate_freeze_step > 0 && c.connection.autonorm_mode != AutoNormMode::kLearned) {
    return absl::InvalidArgumentError(
        "config key 'gate_freeze_step' is for autonorm_mode learned (a random gate has nothing to "
        "freeze)");
  }
  if (c.inter_loop_norm != InterLoopNorm::kNone && c.loops < 2) {
    return absl::InvalidArgumentError(
        "config key 'inter_loop_norm' needs loops >= 2 (it acts between two loops)");
  }
  if ((c.inter_loop_norm == InterLoopNorm::kLayerNorm ||
       c.inter_loop_norm == InterLoopNorm::kRmsNorm) &&
      c.connection.method == Method::kNgpt) {
    return absl::InvalidArgumentError(
        "config key 'inter_loop_norm' layernorm or rmsnorm is not for method ngpt: its hidden "
        "state stays on the unit sphere (sphere, a no-op there, or none)");
  }
  return absl::OkStatus();
}

// cpu, cuda or cuda:N (N up to 4 digits), by plain character tests: no regex on a config's text.
bool IsDevice(const std::string& device) {
  if (device == "cpu" || device == "cuda") return true;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5 || device.size() > 9) return false;
  return std::all_of(device.begin() + 5, device.end(), absl::ascii_isdigit);
}

// A whole number in full ("10000000", not "1e+07"), else the knob's usual form.
std::string Format(double value) {
  return NumberText(value, std::abs(value) < 1e15 && value == std::floor(value) ? 16 : 6);
}

// "" when lo <= value <= hi (lo < value when `open_low`; value < hi when `open_high`), else a
// message naming the key, the range and the value. NaN is never in range.
std::string InRange(const char* key, double value, double lo, double hi, bool open_low = false,
                    bool open_high = false) {
  const bool low_ok = open_low ? value > lo : value >= lo;
  const bool high_ok = open_high ? value < hi : value <= hi;
  if (low_ok && high_ok) return "";
  const std::string high = std::isinf(hi) ? "inf" : Format(hi);
  return std::string("config key '") + key + "' must be in " + (open_low ? "(" : "[") + Format(lo) +
         ", " + high + (open_high ? ")" : "]") + ", got " + Format(value);
}

// The ranges of the step counts and intervals (kMaxSteps); "" when all hold.
std::string StepRangeError(const TrainConfig& c) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  constexpr auto kSteps = static_cast<double>(kMaxSteps);
  for (std::string error : {
           InRange("warmup_iters", d(c.warmup_iters), 0, kSteps),
           InRange("lr_decay_iters", d(c.lr_decay_iters), 0, kSteps),
           InRange("max_iters", d(c.max_iters), 0, kSteps),
           InRange("eval_interval", d(c.eval_interval), 1, kSteps),
           InRange("log_interval", d(c.log_interval), 1, kSteps),
           InRange("diag_interval", d(c.diag_interval), 0, kSteps),
           InRange("checkpoint_interval", d(c.checkpoint_interval), 0, kSteps),
           InRange("gate_freeze_step", d(c.gate_freeze_step), 0, kSteps),
           InRange("jacobian_interval", d(c.jacobian_interval), 0, kSteps),
       }) {
    if (!error.empty()) return error;
  }
  return "";
}

}  // namespace

absl::Status CheckRanges(const TrainConfig& c) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  constexpr auto kBatch = static_cast<double>(kMaxBatch);
  for (const std::string& error : {
           InRange("n_layer", d(c.n_layer), 1, kMaxHeads),
           InRange("n_head", d(c.n_head), 1, kMaxHeads),
           InRange("n_embd", d(c.n_embd), 1, kMaxEmbd),
           InRange("block_size", d(c.block_size), 1, kBatch),
           InRange("vocab_size", d(c.vocab_size), 0, static_cast<double>(kMaxVocab)),
           InRange("dropout", c.dropout, 0, 1, false, /*open_high=*/true),
           InRange("p", c.connection.p, 0, kMaxP, /*open_low=*/true),
           InRange("ngpt_alpha_init", c.connection.ngpt_alpha_init, 0, kMaxAlphaInit, true),
           InRange("learning_rate", c.learning_rate, 0, kMaxLearningRate, /*open_low=*/true),
           InRange("min_lr", c.min_lr, 0, kMaxLearningRate),
           InRange("batch_size", d(c.batch_size), 1, kBatch),
           InRange("gradient_accumulation_steps", d(c.gradient_accumulation_steps), 1, kBatch),
           InRange("batch_shards", d(c.batch_shards), 0, kBatch),
           InRange("weight_decay", c.weight_decay, 0, kMaxWeightDecay),
           InRange("beta1", c.beta1, 0, 1, false, true),
           InRange("beta2", c.beta2, 0, 1, false, true),
           InRange("grad_clip", c.grad_clip, 0, kMaxGradClip),
           InRange("eval_iters", d(c.eval_iters), 1, kBatch),
           InRange("divergence_loss", c.divergence_loss, 0, kMaxLossBound, true),
           InRange("spike_margin", c.spike_margin, 0, kMaxLossBound, true),
           InRange("seed", d(c.seed), 0, kInf, false, true),
           InRange("loops", d(c.loops), 1, kMaxLoops),
           InRange("norm_penalty", c.norm_penalty, 0, kMaxNormPenalty),
           InRange("gate_temp_start", c.gate_temp_start, kMinGateTemp, kMaxGateTemp),
           InRange("gate_temp_end", c.gate_temp_end, kMinGateTemp, kMaxGateTemp),
           InRange("jacobian_iters", d(c.jacobian_iters), 1, kMaxJacobianIters),
           StepRangeError(c),
       }) {
    if (!error.empty()) return absl::InvalidArgumentError(error);
  }
  return absl::OkStatus();
}

absl::Status CheckRuntime(const TrainConfig& c) {
  if (!IsDevice(c.device)) {
    return absl::InvalidArgumentError("config key 'device' must be cpu, cuda or cuda:N, got \"" +
                                      TextPrefix(c.device) + "\"");
  }
  if (c.dtype != "float32" && c.dtype != "bfloat16") {
    return absl::InvalidArgumentError("config key 'dtype' must be float32 or bfloat16, got \"" +
                                      TextPrefix(c.dtype) + "\"");
  }
  if (c.dtype == "bfloat16" && c.device == "cpu") {
    return absl::InvalidArgumentError(
        "config key 'dtype' bfloat16 (autocast) needs a CUDA device; use float32 on cpu");
  }
  if (c.batch_shards > c.batch_size) {
    return absl::InvalidArgumentError(
        "config key 'batch_shards' (" + std::to_string(c.batch_shards) +
        ") must be at most batch_size (" + std::to_string(c.batch_size) + ")");
  }
  if (c.batch_shards > 1 && c.device != "cpu") {
    return absl::InvalidArgumentError(
        "config key 'batch_shards' above 1 is for device cpu (a GPU runs the batch at once)");
  }
  if (c.batch_shards > 1 && c.dropout > 0) {
    return absl::InvalidArgumentError(
        "config key 'batch_shards' above 1 needs dropout 0: concurrent shards would draw "
        "dropout masks from one generator in no fixed order");
  }
  return absl::OkStatus();
}

absl::Status CheckZeroShot(const TrainConfig& c) {
  if (c.eval_every != "final" && c.eval_every != "checkpoints") {
    return absl::InvalidArgumentError(
        "config key 'eval_every' must be final or checkpoints, got \"" + TextPrefix(c.eval_every) +
        "\"");
  }
  if (c.eval_tasks.empty()) return absl::OkStatus();
  for (absl::string_view name : absl::StrSplit(c.eval_tasks, ',', absl::SkipWhitespace())) {
    const std::vector<std::string>& known = ZeroShotTaskNames();
    if (std::find(known.begin(), known.end(), std::string(absl::StripAsciiWhitespace(name))) ==
        known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("config key 'eval_tasks': unknown task '",
                                                     name, "' (known: ", absl::StrJoin(known, ", "),
                                                     ")"));
    }
  }
  if (c.eval_data.empty()) {
    return absl::InvalidArgumentError(
        "config key 'eval_tasks' needs eval_data: the folder with one sub-folder per task");
  }
  return absl::OkStatus();
}

absl::Status CheckInitFrom(const TrainConfig& c) {
  if (c.init_from.empty()) return absl::OkStatus();
  constexpr absl::string_view kPrefix = "hf-gpt2:";
  if (!absl::StartsWith(c.init_from, kPrefix) || c.init_from.size() == kPrefix.size()) {
    return absl::InvalidArgumentError(
        "config key 'init_from' must be hf-gpt2:DIR (a Hugging Face GPT-2 folder), got \"" +
        TextPrefix(c.init_from) + "\"");
  }
  const char* why = !c.bias                                   ? "bias: false"
                    : c.pos_encoding != PosEncoding::kLearned ? "pos_encoding: rope"
                    : c.connection.method == Method::kNgpt    ? "method ngpt (an untied head)"
                                                              : nullptr;
  if (why == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "config key 'init_from' loads GPT-2's weights, which need biases, learned positions and a "
      "tied head; this run has ",
      why));
}

absl::Status ApplyMethodDefaults(TrainConfig* config) {
  nlohmann::json missing = nlohmann::json::object();
  const nlohmann::json defaults = MethodDefaults(std::string(MethodId(config->connection.method)));
  for (const auto& [key, value] : defaults.items()) {
    if (config->explicit_keys.count(key) == 0) missing[key] = value;
  }
  return ApplyConfigJson(missing, config);
}

absl::Status CheckRelatedMethods(TrainConfig* c) {
  if (!c->loop_loss_weights.empty()) {
    if (!c->per_loop_loss) {
      return absl::InvalidArgumentError(
          "config key 'loop_loss_weights' needs per_loop_loss true (without it only the last "
          "loop's readout is trained)");
    }
    std::vector<double> weights;
    if (absl::Status error = ParseLoopWeights(c->loop_loss_weights, &weights); !error.ok()) {
      return error;
    }
    if (static_cast<int64_t>(weights.size()) != c->loops) {
      return absl::InvalidArgumentError(
          absl::StrCat("config key 'loop_loss_weights' has ", weights.size(),
                       " weights for loops = ", c->loops, "; give one per loop"));
    }
  }
  if (c->n_layer * c->loops > kMaxStackDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config keys 'n_layer' x 'loops' (", c->n_layer, " x ", c->loops, ") must be at most ",
        kMaxStackDepth, ", the deepest stack diag events number"));
  }
  if (c->per_loop_loss && c->loops < 2) {
    return absl::InvalidArgumentError("config key 'per_loop_loss' needs loops >= 2");
  }
  if (c->bias && c->connection.method == Method::kNgpt) {
    return absl::InvalidArgumentError(
        "config key 'bias' must be false for method ngpt (nGPT has no biases; it is false unless "
        "set)");
  }
  if (c->pos_encoding == PosEncoding::kRope && c->n_embd % c->n_head == 0 &&
      (c->n_embd / c->n_head) % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key 'pos_encoding' rope needs an even head size n_embd / n_head, got ",
                     c->n_embd, " / ", c->n_head, " = ", c->n_embd / c->n_head));
  }
  if (c->gate_freeze_step > 0 && c->connection.method != Method::kAutoNorm) {
    return absl::InvalidArgumentError(
        "config key 'gate_freeze_step' is for method autonorm, got method " +
        std::string(MethodId(c->connection.method)));
  }
  if (absl::Status error = CheckGateModeAndInterLoopNorm(*c); !error.ok()) return error;
  return ApplyReadout(c);
}

std::vector<double> LoopLossWeights(const TrainConfig& config) {
  std::vector<double> weights;
  if (config.loop_loss_weights.empty() ||
      !ParseLoopWeights(config.loop_loss_weights, &weights).ok()) {
    weights.assign(static_cast<size_t>(config.loops), 1.0);
  }
  return weights;
}

// Declared in train_config.h, kept beside CheckZeroShot.
const std::vector<std::string>& ZeroShotTaskNames() {
  static const std::vector<std::string> kNames = {
      "arc_easy", "arc_challenge", "boolq",      "hellaswag",  "lambada_openai", "openbookqa",
      "piqa",     "sciq",          "social_iqa", "winogrande", "wikitext"};
  return kNames;
}

absl::StatusOr<std::string> ResolveEvalDataDir(const TrainConfig& config) {
  return ResolveUnderRoot("config key 'eval_data'", config.eval_data, "--data-root",
                          config.data_root);
}

}  // namespace spheret
