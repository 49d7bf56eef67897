// Per-layer geometry from the trainer's `diag` events (stored as metrics
// diag/FIELD/LAYER/SUBLAYER): profiles over depth for figures, and per-trial summaries for the
// geometry table (norm preservation, rotation angle, angle cap, step size, radial share). Pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report/plot.h"
#include "client/report/results.h"

namespace spheret::client {

// The per-layer fields the trainer records (protocol/trainer_events.h): a diag event's ||h|| after
// the connection, rotation angle theta (radians), step size alpha and radial share of F; autonorm's
// gate_choice and gate_prob; the block Jacobian's jacobian_sigma_max, jacobian_sigma_min,
// jacobian_cond, jacobian_tangent_cond and update_radial.
const std::vector<std::string>& DiagFields();

// One trial's values of one field at one sublayer over training.
struct DiagSeries {
  int64_t trial_id = 0;
  std::string config_json;
  int64_t layer = 1;     // from 1
  std::string sublayer;  // attn or mlp
  std::vector<int64_t> steps;
  std::vector<double> values;
};

// Sublayers counted from the embedding: layer l's attn is 2l - 1, its mlp 2l.
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
// at_cap_percent = share of (step, sublayer) rows whose mean angle reached the config's angle_max
// (methods that cap: geonorm, cay_spheret, p_spheret with p > 1); alpha_mean; radial_mean;
// jacobian_cond_mean and jacobian_tangent_cond_mean; gate_CANDIDATE_percent = share of sublayers
// whose last gate_choice is layernorm, rmsnorm, dyt or identity.
void AddGeometrySummaries(const std::map<std::string, std::vector<DiagSeries>>& by_field,
                          std::vector<TrialResult>* trials);
const std::vector<std::string>& GeometryMetrics();

}  // namespace spheret::client
