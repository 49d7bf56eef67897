// Per-layer geometry from the trainer's `diag` events (the coordinator's per-layer values, read
// by field): profiles over depth for figures, and per-trial summaries for the geometry table
// (norm preservation, rotation angle, angle cap, step size, radial share). Pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report/plot.h"
#include "client/report/results.h"

namespace spheret::client {

// The per-layer fields a report draws over depth (protocol/trainer_events.h): ||h|| after the
// connection, rotation angle theta (radians) and mean theta^2, the share of tokens at the angle
// cap, step size alpha, radial share of F, mean token cosine and effective rank of the state;
// Proposition 6's b_norm, eta, delta, margin; autonorm's gate_choice and gate_prob; the update
// Jacobians' jac_sigma_max, jac_sigma_min_upper, jac_sigma_min_lower, jac_bound_max,
// jac_bound_min; on the model row delta_sum, theta2_sum, bound_max, bound_min, e2e_sigma_max,
// e2e_sigma_min_upper, e2e_sigma_min_lower; theta2_budget on the dyadic rows; and the
// jac_sigma_min and e2e_sigma_min of older runs. protocol::DiagFieldReading says which are
// estimates and bounds; every label drawn from a field carries it.
// Any other field name may be plotted too (`plot --diag`); these are the ones a report looks for.
const std::vector<std::string>& DiagFields();

// One trial's values of one field at one row (layer, sublayer) over training.
struct DiagSeries {
  int64_t trial_id = 0;
  TrialConfig config;
  int64_t layer = 1;     // attn, mlp: from 1; model: 0; dyadic: the first update m
  std::string sublayer;  // attn, mlp, model or dyadic
  std::vector<int64_t> steps;
  std::vector<double> values;
};

// Sublayer updates counted from the embedding: layer l's attn is 2l - 1, its mlp 2l; a dyadic
// row starting at update m sits at m; a model row at 0.
int64_t DepthIndex(int64_t layer, const std::string& sublayer);

// mean, max, min or last of `values`; InvalidArgument naming `stat` otherwise.
absl::StatusOr<double> Statistic(const std::vector<double>& values, const std::string& stat);

// Per trial one curve over depth (CurveInput::steps = DepthIndex), each point the `stat` of that
// sublayer's series; for WritePlot with x label "sublayer".
absl::StatusOr<std::vector<CurveInput>> DepthProfiles(const std::vector<DiagSeries>& series,
                                                      const std::string& stat);

// Geometry summaries (metric names of GeometryMetrics()) added to each trial of `trials` that has
// diag series of the field: hidden_norm_last = mean over sublayers of the last ||h||;
// hidden_norm_drift = max over sublayers of max/min ||h|| over training; theta_mean, theta_max;
// at_cap_percent = 100 x the mean over rows of the trainer's at_cap (the share of tokens whose
// angle sits at the cap) when it recorded one, else the share of (step, sublayer) rows whose
// mean angle reached the config's angle_max (methods that cap: geonorm, cay_spheret, p_spheret
// with p > 1; none for angle_max "none", the uncapped update); alpha_mean; radial_mean;
// delta_sum_mean and theta2_sum_mean (Proposition 6's S and A, mean over the logged steps);
// token_cos_max = the largest last mean token cosine of any row; gate_CANDIDATE_percent = share of
// sublayers whose last gate_choice is layernorm, rmsnorm, dyt or identity.
void AddGeometrySummaries(const std::map<std::string, std::vector<DiagSeries>>& by_field,
                          std::vector<TrialResult>* trials);
const std::vector<std::string>& GeometryMetrics();
// The diag field a geometry metric summarizes (geometry/alpha_mean -> protocol::kAlpha), "" for
// other metrics.
std::string DiagFieldOf(const std::string& metric);
// Whether `row`'s cell of `metric` is "n/a" rather than "—" when it has no value: a diagnostic
// its method does not record, for a method that marks them (the registry's
// marks_not_applicable: `scripted`).
bool NotApplicable(const ResultRowKey& row, const std::string& metric);

}  // namespace spheret::client
