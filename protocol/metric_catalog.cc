#include "protocol/metric_catalog.h"

#include <algorithm>
#include <iterator>

namespace spheret::protocol {
namespace {

constexpr Direction kNone = Direction::kNone;
constexpr Direction kLower = Direction::kLower;
constexpr Direction kHigher = Direction::kHigher;
constexpr Level kStep = Level::kStep;
constexpr Level kLayer = Level::kLayer;
constexpr Level kModel = Level::kModel;
constexpr Level kDyadic = Level::kDyadic;

// {name, label, unit, direction, level, prometheus family, exported, reading, legacy}
const MetricInfo kCatalog[] = {
    {kTrainLoss, "train loss", "nats", kLower, kStep, "spheret_train_loss", true},
    {kTrainLossAvg, "train loss", "nats", kLower, kStep},
    {kTrainLossSpikes, "loss spikes", "steps", kLower, kStep},
    {kTrainObjective, "train objective", "nats", kLower, kStep},
    {kTrainLoopLossPrefix, "loop train loss", "nats", kLower, kStep},
    {kValLoss, "val loss", "nats", kLower, kStep, "spheret_val_loss", true},
    {kValPpl, "val ppl", "", kLower, kStep},
    {kValLoopLossPrefix, "loop val loss", "nats", kLower, kStep},
    {kValLoopPplPrefix, "loop val ppl", "", kLower, kStep},
    {kLearningRate, "learning rate", "", kNone, kStep, "spheret_learning_rate", true},
    {kGradNorm, "grad norm", "", kNone, kStep},
    {kTokensPerSec, "tokens/s", "tokens/s", kHigher, kStep, "spheret_tokens_per_second", true},
    // The connection's geometry per attn and mlp row.
    {kHiddenNorm, "hidden_norm", "", kNone, kLayer, "spheret_hidden_norm", true},
    {kTheta, "theta", "radians", kNone, kLayer, "spheret_rotation_angle_radians", true},
    {kTheta2, "theta2", "radians^2", kNone, kLayer, "", true},
    {kAtCap, "at_cap", "", kNone, kLayer, "", true},
    {kAlpha, "alpha", "", kNone, kLayer, "", true},
    {kRadial, "radial", "", kNone, kLayer, "", true},
    {kTokenCos, "token_cos", "", kNone, kLayer, "", true},
    {kEffRank, "eff_rank", "", kNone, kLayer, "", true},
    // Proposition 6 per sphere update.
    {kBNorm, "b_norm", "", kNone, kLayer, "", true},
    {kEta, "eta", "", kNone, kLayer, "", true},
    {kDelta, "delta", "", kNone, kLayer, "", true},
    {kMargin, "margin", "", kNone, kLayer, "", true},
    {kMinAbsCos, "min_abs_cos", "", kNone, kLayer},
    // AutoNorm's gates.
    {kGateChoice, "gate_choice", "", kNone, kLayer, "", true},
    {kGateProb, "gate_prob", "", kNone, kLayer, "", true},
    // The block Jacobians, one-sided (worker/nn/jacobian.h, fp64, on one sequence).
    {kJacSigmaMax, "jac_sigma_max", "", kNone, kLayer, "", true,
     "lower estimate of sigma_max(J_l)"},
    {kJacSigmaMinUpper, "jac_sigma_min_upper", "", kNone, kLayer, "", true,
     "upper bound on sigma_min(J_l)"},
    {kJacSigmaMinLower, "jac_sigma_min_lower", "", kNone, kLayer, "", true,
     "lower bound on sigma_min(J_l) (0: not certified)"},
    {kJacBoundMax, "jac_bound_max", "", kNone, kLayer, "", true,
     "Prop. 6 upper bound 1 + Delta_l on sigma_max(J_l)"},
    {kJacBoundMin, "jac_bound_min", "", kNone, kLayer, "", true,
     "Prop. 6 lower bound m_l on sigma_min(J_l)"},
    // Whole-model values on the model row; the dyadic budgets on the dyadic rows.
    {kDeltaSum, "delta_sum", "", kNone, kModel, "", true},
    {kTheta2Sum, "theta2_sum", "radians^2", kNone, kModel, "", true},
    {kBoundMax, "bound_max", "", kNone, kModel, "", true,
     "Prop. 6 upper bound exp(sum Delta_l) on sigma_max(G)"},
    {kBoundMin, "bound_min", "", kNone, kModel, "", true,
     "Prop. 6 lower bound prod m_l on sigma_min(G)"},
    {kE2eSigmaMax, "e2e_sigma_max", "", kNone, kModel, "", true, "lower estimate of sigma_max(G)"},
    {kE2eSigmaMinUpper, "e2e_sigma_min_upper", "", kNone, kModel, "", true,
     "upper bound on sigma_min(G)"},
    {kE2eSigmaMinLower, "e2e_sigma_min_lower", "", kNone, kModel, "", true,
     "lower bound on sigma_min(G) (0: not certified)"},
    {kTheta2Budget, "theta2_budget", "radians^2", kNone, kDyadic, "", true},
    // Runs before the fp64 interval logged these: an uncertified fp32 upper estimate.
    {kJacSigmaMin, "jac_sigma_min", "", kNone, kLayer, "", true,
     "uncertified fp32 upper estimate of sigma_min(J_l), may read 0", true},
    {kE2eSigmaMin, "e2e_sigma_min", "", kNone, kModel, "", true,
     "uncertified fp32 upper estimate of sigma_min(G), may read 0", true},
};

// The family prefix of a looped model's per-loop name ("val/loop_loss/3" -> "val/loop_loss/").
std::string_view LoopFamily(std::string_view name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string_view::npos || slash + 1 == name.size()) return name;
  const std::string_view digits = name.substr(slash + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return name;
  }
  return name.substr(0, slash + 1);
}

}  // namespace

const std::vector<MetricInfo>& MetricCatalog() {
  static const std::vector<MetricInfo> kAll(std::begin(kCatalog), std::end(kCatalog));
  return kAll;
}

const MetricInfo* FindMetric(std::string_view name) {
  const std::string_view family = LoopFamily(name);
  for (const MetricInfo& info : kCatalog) {
    if (info.name == name || info.name == family) return &info;
  }
  return nullptr;
}

std::string_view MetricLabel(std::string_view name) {
  const MetricInfo* info = FindMetric(name);
  return info == nullptr ? name : info->label;
}

std::vector<std::string> MetricNames(std::initializer_list<Level> levels, bool exported_only) {
  std::vector<std::string> names;
  for (const MetricInfo& info : kCatalog) {
    if (std::find(levels.begin(), levels.end(), info.level) == levels.end()) continue;
    if (exported_only && !info.exported) continue;
    if (info.name.back() == '/') continue;  // a looped model's family, not a name
    names.emplace_back(info.name);
  }
  return names;
}

}  // namespace spheret::protocol
