// Options of a deep connection: the method id and every knob of docs/methods.md.
//
// A connection is the rule that turns the hidden state h and a sublayer output F into the next
// hidden state. `ConnectionOptions` carries everything needed to build one sublayer's connection;
// `ValidateConnectionOptions` checks it once, before any module is built.
//
// This header is torch-free so that configuration code can include it cheaply.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace spheret {

enum class Method {
  kPreLn,
  kPostLn,
  kPreDyt,
  kPeriLn,
  kKeel,
  kGeoNorm,
  kProjSpheret,
  kCaySpheret,
  kPSpheret,
  kNgpt,      // nGPT's normalized residual on the unit sphere (docs/methods.md §3)
  kAutoNorm,  // pre-norm with a learned Gumbel-softmax choice of the norm (docs/methods.md §3)
  kScripted,  // a researcher's TorchScript connection (`connection: FILE`, docs/connections.md)
};

// Step-size decay over depth: lambda_l = 1/sqrt(l), 1/l, (n - l)/n (the paper's Code 1: the last
// update is the identity), or 1.
enum class Decay { kSqrt, kHarmonic, kLinear, kNone };
// Which index l runs over: blocks (both sublayers of block l share l, n = L) or sublayers
// (l = 1..2L, n = 2L).
enum class DecayIndex { kBlock, kSublayer };
// alpha_l = clamp(softplus(a), max=1) * lambda_l (paper) or lambda_l * sigmoid(a) (ablation).
enum class StepParam { kClamp, kSigmoid };
// ScaleNorm radius r = clamp(softplus(gamma), 1, sqrt(C)) (paper) or softplus(gamma) (ablation).
enum class RadiusParam { kClamp, kFree };
// A normalization slot: the inner norm that F sees (sphere methods) or the final norm before the
// head. For pre_dyt, `kLayerNorm` in the final slot means DyT (every LN becomes DyT).
enum class NormKind { kLayerNorm, kRmsNorm, kNone };
// Where attention gets positions from: nanoGPT's learned absolute embedding wpe added to the token
// embedding, or rotary embeddings on q and k (worker/nn/rope.h; no wpe). A model knob beside the
// connection (TrainConfig::pos_encoding, GptConfig::pos_encoding).
enum class PosEncoding { kLearned, kRope };
// AutoNorm's gate (docs/methods.md §3): learned (Gumbel-softmax over learnable logits), or the
// random-selection baseline: a uniform draw per sublayer at every step (random) or once per run
// (random_fixed), with no gate parameters.
enum class AutoNormMode { kLearned, kRandom, kRandomFixed };
// What a looped model applies to h between loop k and loop k + 1 (docs/methods.md §3): nothing,
// a learned LayerNorm / RMSNorm shared by every boundary, or the projection back to the radius
// of the stack's input, ||h_0|| h / ||h|| per token.
enum class InterLoopNorm { kNone, kLayerNorm, kRmsNorm, kSphere };

struct ConnectionOptions {
  Method method = Method::kPreLn;
  int64_t n_embd = 768;  // C, the hidden width.
  int64_t n_layer = 12;  // L, the number of blocks.
  bool bias = true;      // Bias in LayerNorm / DyT, as in the paper.
  // p of p_spheret; must be > 0 for every method (only p_spheret reads it).
  double p = 1.0;
  // Angle cap theta_max in radians, in (0, pi/2], or +inf for none (the uncapped update, written
  // "none" in configs). Read by geonorm, cay_spheret, p_spheret (p > 1).
  double angle_max = 0.78539816339744830962;  // pi/4
  Decay decay = Decay::kSqrt;
  DecayIndex decay_index = DecayIndex::kBlock;
  StepParam step_param = StepParam::kClamp;
  RadiusParam radius_param = RadiusParam::kClamp;
  NormKind inner_norm = NormKind::kLayerNorm;  // What F sees for sphere methods.
  NormKind final_norm = NormKind::kLayerNorm;  // ln_f before the LM head.
  // First-layer modified ScaleNorm; unset: the method's default (ScaleNormOn).
  std::optional<bool> scalenorm;
  double dyt_alpha_init = 0.5;  // Initial a of DyT(x) = g * tanh(a x) + b.
  // nGPT's eigen learning rate alpha at init (per dimension, stored scaled by 1/sqrt(C)).
  double ngpt_alpha_init = 0.05;
  AutoNormMode autonorm_mode = AutoNormMode::kLearned;  // autonorm only
  // Use the fused sphere update (hand-written backward; CUDA kernel on CUDA tensors). When false
  // the composite form (autograd over the literal formulas) runs; both compute the same map.
  bool fused = true;
  // Method scripted: the TorchScript file's bytes (LoadConnectionScript in
  // config/connection_script.h fills it from the config's `connection` keys).
  std::string script;
};

// Where a connection sits: block index (1-based) and sublayer (0 = attention, 1 = MLP).
struct SublayerPosition {
  int64_t block = 1;
  int sublayer = 0;
};

// The spellings of each enum knob as written in configs, e.g. for Decay
// {{"sqrt", kSqrt}, {"harmonic", kHarmonic}, {"linear", kLinear}, {"none", kNone}}. Defined for
// Method, Decay, DecayIndex, StepParam, RadiusParam, NormKind and PosEncoding.
template <typename Enum>
const std::vector<std::pair<std::string_view, Enum>>& KnobSpellings();

template <>
const std::vector<std::pair<std::string_view, Method>>& KnobSpellings<Method>();
template <>
const std::vector<std::pair<std::string_view, Decay>>& KnobSpellings<Decay>();
template <>
const std::vector<std::pair<std::string_view, DecayIndex>>& KnobSpellings<DecayIndex>();
template <>
const std::vector<std::pair<std::string_view, StepParam>>& KnobSpellings<StepParam>();
template <>
const std::vector<std::pair<std::string_view, RadiusParam>>& KnobSpellings<RadiusParam>();
template <>
const std::vector<std::pair<std::string_view, NormKind>>& KnobSpellings<NormKind>();
template <>
const std::vector<std::pair<std::string_view, PosEncoding>>& KnobSpellings<PosEncoding>();
template <>
const std::vector<std::pair<std::string_view, AutoNormMode>>& KnobSpellings<AutoNormMode>();
template <>
const std::vector<std::pair<std::string_view, InterLoopNorm>>& KnobSpellings<InterLoopNorm>();

// The value spelled `id`, or nullopt.
template <typename Enum>
std::optional<Enum> ParseKnob(std::string_view id) {
  for (const auto& [name, value] : KnobSpellings<Enum>()) {
    if (name == id) return value;
  }
  return std::nullopt;
}

// The spelling of `value`.
template <typename Enum>
std::string_view KnobId(Enum value) {
  for (const auto& [name, candidate] : KnobSpellings<Enum>()) {
    if (candidate == value) return name;
  }
  return "unknown";
}

inline std::optional<Method> ParseMethod(std::string_view id) { return ParseKnob<Method>(id); }
inline std::string_view MethodId(Method method) { return KnobId(method); }
// True for geonorm and the SpheretNorm family.
bool IsSphereMethod(Method method);
// Every method's id: the paper's order (Table 2: the Euclidean baselines, then the sphere
// family), then the related methods (ngpt, autonorm).
std::vector<std::string> MethodIds();

// OK when `options` is valid, else InvalidArgument naming the bad knob, its value and what would
// be valid (e.g. "p must be > 0, got -1").
absl::Status ValidateConnectionOptions(const ConnectionOptions& options);

// Whether the embedding output goes through the first-layer ScaleNorm: options.scalenorm when set,
// else the paper's default (§4.2): on for proj_spheret, cay_spheret and p_spheret ("all three
// types of SpheretNorm"), off for geonorm (Eq. 3 has none) and every non-sphere method.
bool ScaleNormOn(const ConnectionOptions& options);

// lambda_l for `position` under options.decay / options.decay_index; in [0, 1] (linear reaches 0
// at the last update).
double DecayFactor(const ConnectionOptions& options, const SublayerPosition& position);

// What a reader of a run should know about a faithful but surprising choice of knobs, one
// sentence each ("" none): `decay: linear` on a sphere method makes the last update the identity
// (lambda_n = 0, Code 1), and with `decay_index: block` that is the whole last block. The trainer
// prints them at start.
std::vector<std::string> ConnectionNotes(const ConnectionOptions& options, int64_t n_layer);

}  // namespace spheret
