// Every metric and per-layer field the trainer emits, once: the name it is written, stored and
// queried under, the label every output prints for it, its unit, which way is better, at which
// level it is measured, and where the coordinator exports it to Prometheus. The trainer's writer,
// the coordinator's store and /metrics, the reports, the plots and the dashboards' tests read the
// facts from here; scripts/check_layout.py (rule 7) counts the files that spell a name instead.
//
// Adding a metric: a constant below, one row in MetricCatalog() (protocol/metric_catalog.cc), and
// the code that measures it. Names are short and plain (protocol/diag_values.h's field rule for
// diag fields); a looped model's per-exit names come from the functions below.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace spheret::protocol {

// Which way is better: a loss goes down, an accuracy up; a geometry value has no direction.
enum class Direction { kNone, kLower, kHigher };

// Where a value is measured: a step's metric event (curves and summaries), or a diag row: the
// attn and mlp rows of a layer, the model row (layer 0) or the dyadic rows.
enum class Level { kStep, kLayer, kModel, kDyadic };

struct MetricInfo {
  std::string_view name;   // as written by the trainer and stored
  std::string_view label;  // what a column, axis or legend prints ("val loss", "theta")
  std::string_view unit;   // "" for a plain number; "nats", "radians", "tokens/s", ...
  Direction direction = Direction::kNone;
  Level level = Level::kStep;
  // Prometheus: a step metric's own gauge family of running trials ("" when not exported); a
  // diag field is exported as spheret_layer_value{field="NAME"} when `exported`.
  std::string_view prometheus = "";
  bool exported = false;
  // What the number is where it is not simply the measured value (a bound, an estimate), for
  // every output to print beside it; "" for any other metric. See DiagFieldReading.
  std::string_view reading = "";
  // An old trainer's name kept readable in stored databases; today's trainer does not write it.
  bool legacy = false;
};

// ---- Step metrics (metric events) ----
inline constexpr char kTrainLoss[] = "train/loss";
inline constexpr char kTrainLossAvg[] = "train/loss_avg";  // mean of the last 200 step losses
// Steps so far whose loss exceeded the mean of the 200 before by more than spike_margin.
inline constexpr char kTrainLossSpikes[] = "train/loss_spikes";
// What training minimized when it is not train/loss (per_loop_loss, norm_penalty).
inline constexpr char kTrainObjective[] = "train/objective";
inline constexpr char kValLoss[] = "val/loss";
inline constexpr char kValPpl[] = "val/ppl";
inline constexpr char kLearningRate[] = "lr";
inline constexpr char kGradNorm[] = "grad_norm";
inline constexpr char kTokensPerSec[] = "tokens_per_sec";
inline constexpr char kEvalErrorMetric[] = "error";  // the metric of a failed evaluation's event

// A looped model: the CE of loop K's readout under per_loop_loss (K from 1; train/loss is the last
// readout's CE), and the val loss of exit K (the readout after loop K) and exp of it.
inline constexpr char kTrainLoopLossPrefix[] = "train/loop_loss/";
inline constexpr char kValLoopLossPrefix[] = "val/loop_loss/";
inline constexpr char kValLoopPplPrefix[] = "val/loop_ppl/";
inline std::string LoopLossMetricName(int64_t loop) {
  return kTrainLoopLossPrefix + std::to_string(loop);
}
inline std::string ValLoopLossMetricName(int64_t k) {
  return kValLoopLossPrefix + std::to_string(k);
}
inline std::string ValLoopPplMetricName(int64_t k) { return kValLoopPplPrefix + std::to_string(k); }

// ---- Diag fields: the attn and mlp rows (the connection's geometry) ----
inline constexpr char kHiddenNorm[] = "hidden_norm";
inline constexpr char kTheta[] = "theta";
inline constexpr char kTheta2[] = "theta2";
inline constexpr char kAtCap[] = "at_cap";
inline constexpr char kAlpha[] = "alpha";
inline constexpr char kRadial[] = "radial";
inline constexpr char kTokenCos[] = "token_cos";
inline constexpr char kEffRank[] = "eff_rank";
// Proposition 6, per sphere update.
inline constexpr char kBNorm[] = "b_norm";
inline constexpr char kEta[] = "eta";
inline constexpr char kDelta[] = "delta";
inline constexpr char kMargin[] = "margin";
inline constexpr char kMinAbsCos[] = "min_abs_cos";
// The block Jacobian J_l on a block's mlp row (worker/nn/jacobian.h).
inline constexpr char kJacSigmaMax[] = "jac_sigma_max";
inline constexpr char kJacSigmaMinUpper[] = "jac_sigma_min_upper";
inline constexpr char kJacSigmaMinLower[] = "jac_sigma_min_lower";
inline constexpr char kJacSigmaMin[] = "jac_sigma_min";  // legacy
inline constexpr char kJacBoundMax[] = "jac_bound_max";
inline constexpr char kJacBoundMin[] = "jac_bound_min";
// AutoNorm's gates.
inline constexpr char kGateChoice[] = "gate_choice";
inline constexpr char kGateProb[] = "gate_prob";
// ---- The model row (layer 0) and the dyadic rows ----
inline constexpr char kDeltaSum[] = "delta_sum";
inline constexpr char kTheta2Sum[] = "theta2_sum";
inline constexpr char kBoundMax[] = "bound_max";
inline constexpr char kBoundMin[] = "bound_min";
inline constexpr char kE2eSigmaMax[] = "e2e_sigma_max";
inline constexpr char kE2eSigmaMinUpper[] = "e2e_sigma_min_upper";
inline constexpr char kE2eSigmaMinLower[] = "e2e_sigma_min_lower";
inline constexpr char kE2eSigmaMin[] = "e2e_sigma_min";  // legacy
inline constexpr char kTheta2Budget[] = "theta2_budget";

// Every metric and diag field, step metrics first, then the diag fields in the order the
// reports and /metrics list them.
const std::vector<MetricInfo>& MetricCatalog();

// The entry of `name`, or nullptr for a name not in the catalog. A looped model's per-loop names
// (train/loop_loss/K, val/loop_loss/K, val/loop_ppl/K) resolve to their family's entry.
const MetricInfo* FindMetric(std::string_view name);

// The label of `name` (its own name when the catalog does not know it).
std::string_view MetricLabel(std::string_view name);

// The names of the catalog's entries at `levels`, in catalog order; exported_only keeps the ones
// /metrics exports.
std::vector<std::string> MetricNames(std::initializer_list<Level> levels,
                                     bool exported_only = false);

}  // namespace spheret::protocol
