#include "config/connection_options.h"

#include <cmath>

#include "config/knob_text.h"
#include "config/method_registry.h"

namespace spheret {

// The methods' spellings are the registry's ids (config/method_registry.cc).
template <>
const std::vector<std::pair<std::string_view, Method>>& KnobSpellings<Method>() {
  static const std::vector<std::pair<std::string_view, Method>> table = [] {
    std::vector<std::pair<std::string_view, Method>> ids;
    for (const MethodSpec& spec : MethodRegistry()) ids.emplace_back(spec.id, spec.method);
    return ids;
  }();
  return table;
}

template <>
const std::vector<std::pair<std::string_view, Decay>>& KnobSpellings<Decay>() {
  static const std::vector<std::pair<std::string_view, Decay>> table = {
      {"sqrt", Decay::kSqrt},
      {"harmonic", Decay::kHarmonic},
      {"linear", Decay::kLinear},
      {"none", Decay::kNone}};
  return table;
}

template <>
const std::vector<std::pair<std::string_view, DecayIndex>>& KnobSpellings<DecayIndex>() {
  static const std::vector<std::pair<std::string_view, DecayIndex>> table = {
      {"block", DecayIndex::kBlock}, {"sublayer", DecayIndex::kSublayer}};
  return table;
}

template <>
const std::vector<std::pair<std::string_view, StepParam>>& KnobSpellings<StepParam>() {
  static const std::vector<std::pair<std::string_view, StepParam>> table = {
      {"clamp", StepParam::kClamp}, {"sigmoid", StepParam::kSigmoid}};
  return table;
}

template <>
const std::vector<std::pair<std::string_view, RadiusParam>>& KnobSpellings<RadiusParam>() {
  static const std::vector<std::pair<std::string_view, RadiusParam>> table = {
      {"clamp", RadiusParam::kClamp}, {"free", RadiusParam::kFree}};
  return table;
}

template <>
const std::vector<std::pair<std::string_view, NormKind>>& KnobSpellings<NormKind>() {
  static const std::vector<std::pair<std::string_view, NormKind>> table = {
      {"layernorm", NormKind::kLayerNorm},
      {"rmsnorm", NormKind::kRmsNorm},
      {"none", NormKind::kNone}};
  return table;
}

template <>
const std::vector<std::pair<std::string_view, PosEncoding>>& KnobSpellings<PosEncoding>() {
  static const std::vector<std::pair<std::string_view, PosEncoding>> table = {
      {"learned", PosEncoding::kLearned}, {"rope", PosEncoding::kRope}};
  return table;
}

template <>
const std::vector<std::pair<std::string_view, AutoNormMode>>& KnobSpellings<AutoNormMode>() {
  static const std::vector<std::pair<std::string_view, AutoNormMode>> table = {
      {"learned", AutoNormMode::kLearned},
      {"random", AutoNormMode::kRandom},
      {"random_fixed", AutoNormMode::kRandomFixed}};
  return table;
}

template <>
const std::vector<std::pair<std::string_view, InterLoopNorm>>& KnobSpellings<InterLoopNorm>() {
  static const std::vector<std::pair<std::string_view, InterLoopNorm>> table = {
      {"none", InterLoopNorm::kNone},
      {"layernorm", InterLoopNorm::kLayerNorm},
      {"rmsnorm", InterLoopNorm::kRmsNorm},
      {"sphere", InterLoopNorm::kSphere}};
  return table;
}

std::vector<std::string> MethodIds() {
  std::vector<std::string> ids;
  for (const auto& [id, method] : KnobSpellings<Method>()) ids.emplace_back(id);
  return ids;
}

bool IsSphereMethod(Method method) { return SpecOf(method).family == MethodFamily::kSphere; }

absl::Status ValidateConnectionOptions(const ConnectionOptions& options) {
  constexpr double kHalfPi = 1.57079632679489661923;
  if (options.n_embd < 1)
    return absl::InvalidArgumentError("n_embd must be >= 1, got " + std::to_string(options.n_embd));
  if (options.n_layer < 1)
    return absl::InvalidArgumentError("n_layer must be >= 1, got " +
                                      std::to_string(options.n_layer));
  if (!(options.p > 0) || !std::isfinite(options.p)) {
    return absl::InvalidArgumentError("p must be a finite number > 0, got " +
                                      NumberText(options.p));
  }
  const bool uncapped = std::isinf(options.angle_max) && options.angle_max > 0;
  if (!uncapped && !(options.angle_max > 0 && options.angle_max <= kHalfPi)) {
    return absl::InvalidArgumentError("angle_max must be in (0, pi/2] radians or none, got " +
                                      NumberText(options.angle_max));
  }
  if (!std::isfinite(options.dyt_alpha_init)) {
    return absl::InvalidArgumentError("dyt_alpha_init must be finite, got " +
                                      NumberText(options.dyt_alpha_init));
  }
  if (!(options.ngpt_alpha_init > 0) || !std::isfinite(options.ngpt_alpha_init)) {
    return absl::InvalidArgumentError("ngpt_alpha_init must be a finite number > 0, got " +
                                      NumberText(options.ngpt_alpha_init));
  }
  return absl::OkStatus();
}

bool ScaleNormOn(const ConnectionOptions& options) {
  const MethodSpec& spec = SpecOf(options.method);
  if (options.scalenorm) return *options.scalenorm && spec.family == MethodFamily::kSphere;
  return spec.scalenorm_default;
}

double DecayFactor(const ConnectionOptions& options, const SublayerPosition& position) {
  const bool per_sublayer = options.decay_index == DecayIndex::kSublayer;
  const double l = per_sublayer ? 2.0 * (position.block - 1) + position.sublayer + 1
                                : static_cast<double>(position.block);
  const double n = per_sublayer ? 2.0 * options.n_layer : static_cast<double>(options.n_layer);
  switch (options.decay) {
    case Decay::kSqrt:
      return 1.0 / std::sqrt(l);
    case Decay::kHarmonic:
      return 1.0 / l;
    case Decay::kLinear:  // Code 1: (L - l)/L, so lambda_1 = (L-1)/L and lambda_L = 0.
      return (n - l) / n;
    case Decay::kNone:
      return 1.0;
  }
  return 1.0;
}

std::vector<std::string> ConnectionNotes(const ConnectionOptions& options, int64_t n_layer) {
  if (!IsSphereMethod(options.method) || options.decay != Decay::kLinear) return {};
  if (options.decay_index == DecayIndex::kBlock) {
    return {"decay linear with decay_index block: lambda = (L - l)/L is 0 at block " +
            std::to_string(n_layer) +
            ", so both updates of the last block are the identity (the paper's Code 1, as it is "
            "called with the block's index; decay_index: sublayer leaves only the last MLP update "
            "so)"};
  }
  return {"decay linear with decay_index sublayer: lambda is 0 at update " +
          std::to_string(2 * n_layer) + ", so the last MLP update is the identity (Code 1)"};
}

}  // namespace spheret
