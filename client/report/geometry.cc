#include "client/report/geometry.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/report/stats.h"
#include "config/connection_options.h"
#include "config/method_registry.h"
#include "config/trial_config.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

using nlohmann::json;

// Finite for finite values, even near DBL_MAX (a sum would overflow: issue 44, item 12).
double Mean(const std::vector<double>& values) { return FiniteMean(values); }

// The angle cap of the trial's config (docs/methods.md), or nullopt when its method does not cap
// the angle or the config says "angle_max": "none" (the uncapped update).
std::optional<double> AngleCap(const json& config) {
  const json p = config.value("p", json(1.0));
  if (!CapActs(MethodIdOf(config), p.is_number() ? p.get<double>() : 1.0)) return std::nullopt;
  const json cap = config.value("angle_max", json(ConnectionOptions{}.angle_max));
  if (!cap.is_number()) return std::nullopt;  // "none"
  return cap.get<double>();
}

// % of rows at the angle cap: the trainer's per-token share when recorded, else (older runs) the
// share of rows whose mean angle reached the config's cap.
std::optional<double> AtCapPercent(const std::vector<double>& at_cap,
                                   const std::vector<double>& theta, const TrialConfig& config) {
  if (!at_cap.empty()) return 100.0 * Mean(at_cap);
  if (theta.empty()) return std::nullopt;
  const std::optional<double> cap =
      config.is_object() ? AngleCap(config.object()) : std::optional<double>();
  if (!cap) return std::nullopt;
  const auto at =
      std::count_if(theta.begin(), theta.end(), [&](double t) { return t >= *cap * (1 - 1e-6); });
  return 100.0 * static_cast<double>(at) / static_cast<double>(theta.size());
}

// Every value of `field` of the trial, pooled over sublayers and steps.
struct Pooled {
  std::vector<double> values;
  std::vector<double> last;   // per sublayer
  std::vector<double> drift;  // per sublayer: max / min
};

// The share of sublayers whose last gate choice is each of AutoNorm's candidates.
void AddGateShares(const std::vector<double>& last_choices, std::map<std::string, double>* out) {
  if (last_choices.empty()) return;
  static const char* kCandidates[] = {"layernorm", "rmsnorm", "dyt", "identity"};
  for (int i = 0; i < 4; ++i) {
    const auto n = std::count(last_choices.begin(), last_choices.end(), static_cast<double>(i));
    (*out)[absl::StrCat("geometry/gate_", kCandidates[i], "_percent")] =
        100.0 * static_cast<double>(n) / static_cast<double>(last_choices.size());
  }
}

// One trial's geometry summaries (GeometryMetrics) from its pooled fields.
void AddSummaries(std::map<std::string, Pooled>* pooled, TrialResult* trial) {
  std::map<std::string, Pooled>& fields = *pooled;
  std::map<std::string, double>& out = trial->values;
  if (!fields[protocol::kHiddenNorm].last.empty())
    out["geometry/hidden_norm_last"] = Mean(fields[protocol::kHiddenNorm].last);
  if (!fields[protocol::kHiddenNorm].drift.empty()) {
    const std::vector<double>& drift = fields[protocol::kHiddenNorm].drift;
    out["geometry/hidden_norm_drift"] = *std::max_element(drift.begin(), drift.end());
  }
  const std::vector<double>& theta = fields[protocol::kTheta].values;
  if (!theta.empty()) {
    out["geometry/theta_mean"] = Mean(theta);
    out["geometry/theta_max"] = *std::max_element(theta.begin(), theta.end());
  }
  const std::optional<double> at_cap =
      AtCapPercent(fields[protocol::kAtCap].values, theta, trial->config);
  if (at_cap) out["geometry/at_cap_percent"] = *at_cap;
  if (!fields[protocol::kAlpha].values.empty()) {
    out["geometry/alpha_mean"] = Mean(fields[protocol::kAlpha].values);
  }
  if (!fields[protocol::kRadial].values.empty()) {
    out["geometry/radial_mean"] = Mean(fields[protocol::kRadial].values);
  }
  for (const char* field : {protocol::kDeltaSum, protocol::kTheta2Sum}) {  // over logged steps
    if (!fields[field].values.empty()) {
      out[absl::StrCat("geometry/", field, "_mean")] = Mean(fields[field].values);
    }
  }
  const std::vector<double>& token_cos = fields[protocol::kTokenCos].last;
  if (!token_cos.empty()) {  // the most collapsed row at the last logged step
    out["geometry/token_cos_max"] = *std::max_element(token_cos.begin(), token_cos.end());
  }
  AddGateShares(fields[protocol::kGateChoice].last, &out);
}

}  // namespace

const std::vector<std::string>& DiagFields() {
  // The catalog's per-layer, model and dyadic fields that /metrics exports, in its order (the
  // legacy fields of older runs last).
  static const std::vector<std::string> kFields = protocol::MetricNames(
      {protocol::Level::kLayer, protocol::Level::kModel, protocol::Level::kDyadic},
      /*exported_only=*/true);
  return kFields;
}

const std::vector<std::string>& GeometryMetrics() {
  static const std::vector<std::string> kMetrics = {"geometry/hidden_norm_last",
                                                    "geometry/hidden_norm_drift",
                                                    "geometry/theta_mean",
                                                    "geometry/theta_max",
                                                    "geometry/at_cap_percent",
                                                    "geometry/alpha_mean",
                                                    "geometry/radial_mean",
                                                    "geometry/delta_sum_mean",
                                                    "geometry/theta2_sum_mean",
                                                    "geometry/token_cos_max",
                                                    "geometry/gate_layernorm_percent",
                                                    "geometry/gate_rmsnorm_percent",
                                                    "geometry/gate_dyt_percent",
                                                    "geometry/gate_identity_percent"};
  return kMetrics;
}

std::string DiagFieldOf(const std::string& metric) {
  static const std::map<std::string, std::string> kFields = {
      {"geometry/hidden_norm_last", protocol::kHiddenNorm},
      {"geometry/hidden_norm_drift", protocol::kHiddenNorm},
      {"geometry/theta_mean", protocol::kTheta},
      {"geometry/theta_max", protocol::kTheta},
      {"geometry/at_cap_percent", protocol::kAtCap},
      {"geometry/alpha_mean", protocol::kAlpha},
      {"geometry/radial_mean", protocol::kRadial},
      {"geometry/delta_sum_mean", protocol::kDeltaSum},
      {"geometry/theta2_sum_mean", protocol::kTheta2Sum},
      {"geometry/token_cos_max", protocol::kTokenCos}};
  if (metric.rfind("geometry/gate_", 0) == 0) return protocol::kGateChoice;
  const auto found = kFields.find(metric);
  return found == kFields.end() ? "" : found->second;
}

bool NotApplicable(const ResultRowKey& row, const std::string& metric) {
  const std::string field = DiagFieldOf(metric);
  const std::string method = row.method.substr(0, row.method.find(':'));  // scripted:STEM
  return !field.empty() && MarksNotApplicable(method) && !MethodRecords(method, field);
}

int64_t DepthIndex(int64_t layer, const std::string& sublayer) {
  if (sublayer == "dyadic" || sublayer == "model") return layer;
  return 2 * (layer - 1) + (sublayer == "mlp" ? 2 : 1);
}

absl::StatusOr<double> Statistic(const std::vector<double>& values, const std::string& stat) {
  if (stat != "mean" && stat != "max" && stat != "min" && stat != "last") {
    return absl::InvalidArgumentError("--diag-stat must be mean, max, min or last, got '" + stat +
                                      "'");
  }
  if (values.empty()) return std::nan("");
  if (stat == "mean") return Mean(values);
  if (stat == "max") return *std::max_element(values.begin(), values.end());
  if (stat == "min") return *std::min_element(values.begin(), values.end());
  return values.back();
}

absl::StatusOr<std::vector<CurveInput>> DepthProfiles(const std::vector<DiagSeries>& series,
                                                      const std::string& stat) {
  std::map<int64_t, CurveInput> by_trial;
  std::map<int64_t, std::map<int64_t, double>> points;  // trial -> depth -> value
  for (const DiagSeries& one : series) {
    std::vector<double> finite;
    for (double value : one.values) {
      if (std::isfinite(value)) finite.push_back(value);
    }
    absl::StatusOr<double> value = Statistic(finite, stat);
    if (!value.ok()) return value.status();
    if (!std::isfinite(*value)) continue;
    by_trial[one.trial_id].trial_id = one.trial_id;
    by_trial[one.trial_id].config = one.config;
    points[one.trial_id][DepthIndex(one.layer, one.sublayer)] = *value;
  }
  std::vector<CurveInput> curves;
  for (auto& [trial_id, curve] : by_trial) {
    for (const auto& [depth, value] : points[trial_id]) {
      curve.steps.push_back(depth);
      curve.values.push_back(value);
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

void AddGeometrySummaries(const std::map<std::string, std::vector<DiagSeries>>& by_field,
                          std::vector<TrialResult>* trials) {
  // The fields AddSummaries reads: only these are pooled (a campaign's other fields are most of
  // its values; issue 47).
  static const std::set<std::string> kSummarized = {
      protocol::kHiddenNorm, protocol::kTheta,    protocol::kAtCap,
      protocol::kAlpha,      protocol::kRadial,   protocol::kDeltaSum,
      protocol::kTheta2Sum,  protocol::kTokenCos, protocol::kGateChoice};
  std::map<int64_t, std::map<std::string, Pooled>> pooled;  // trial -> field -> values
  for (const auto& [field, series] : by_field) {
    if (kSummarized.count(field) == 0) continue;
    for (const DiagSeries& one : series) {
      Pooled& into = pooled[one.trial_id][field];
      std::vector<double> finite;
      for (double value : one.values) {
        if (std::isfinite(value)) finite.push_back(value);
      }
      if (finite.empty()) continue;
      into.values.insert(into.values.end(), finite.begin(), finite.end());
      into.last.push_back(finite.back());
      const auto [low, high] = std::minmax_element(finite.begin(), finite.end());
      if (*low > 0) into.drift.push_back(*high / *low);
    }
  }
  for (TrialResult& trial : *trials) {
    auto found = pooled.find(trial.trial_id);
    if (found != pooled.end()) AddSummaries(&found->second, &trial);
  }
}

}  // namespace spheret::client
