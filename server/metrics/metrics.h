// Every Prometheus family the coordinator exports, in one place (docs/monitoring.md lists them).
// Live per-trial gauges exist only while a trial runs: TrialEnded removes them. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/metrics/trial_series.h"

namespace spheret::metrics {

// TrialLabels (trial_series.h): the labels of a running trial's gauges: sweep, method, scale, p,
// seed and trial (its id). The series of a trial exist only while it runs (TrialEnded drops them),
// so their number is bounded by the running trials and their depth, not by the database's history
// nor by what a worker sends.

// The per-layer fields exported as spheret_layer_value{field} (a fixed list, so the label set
// stays bounded whatever a trainer sends): the connection's geometry (hidden_norm, theta, theta2,
// at_cap, alpha, radial, token_cos, eff_rank), Proposition 6's per-update quantities (b_norm, eta,
// delta, margin, jac_sigma_max, jac_sigma_min_upper, jac_sigma_min_lower, jac_bound_max,
// jac_bound_min), the model-level values (delta_sum, theta2_sum, bound_max, bound_min,
// e2e_sigma_max, e2e_sigma_min_upper, e2e_sigma_min_lower), older trainers' jac_sigma_min and
// e2e_sigma_min (an uncertified upper estimate), and dyadic
// theta2_budget, AutoNorm's gate_choice and gate_prob, and the block Jacobian's
// jacobian_sigma_max, jacobian_sigma_min, jacobian_cond, jacobian_tangent_cond and update_radial.
const std::vector<std::string>& ExportedLayerFields();

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(const std::string& version);
  // Everything the coordinator exports (its registry's families and the running trials' gauges),
  // for an Exposer or a serializer.
  std::shared_ptr<prometheus::Collectable> registry() const { return exported_; }
  // How many gauges the running trials have.
  size_t trial_series() const { return trial_series_->size(); }

  // Trials per state name (TrialStateName); every state is exported, absent ones as 0.
  void SetTrialCounts(const std::map<std::string, int64_t>& by_state);
  // spheret_eval_jobs{state}: the evaluation jobs (`spheret eval`) among the trials.
  void SetEvalJobCounts(const std::map<std::string, int64_t>& by_state);
  void SetQueueDepth(int64_t pending);
  void SetWorkers(int64_t alive, int64_t stale);
  void SetSlots(int64_t busy, int64_t free);
  void ObserveScheduleLatency(double seconds);
  void AddLeaseExpirations(int64_t count);
  // A stall of the coordinator itself (no decision for `seconds`, see CoordinatorOptions).
  void AddStall(double seconds);
  void AddMetricRows(int64_t count);
  void ObserveCommit(double seconds);
  // An ASHA search stopped a trial of `sweep` at `step` of its `max_iters`
  // (spheret_trials_pruned_total, spheret_search_iters_saved_total: the iterations it will not
  // train).
  void TrialPruned(const std::string& sweep, int64_t step, int64_t max_iters);
  // spheret_search_rung_trials{sweep, rung}: the trials an ASHA search has judged at a rung.
  void SetRungTrials(const std::string& sweep, int rung, int64_t trials);

  // A running trial's latest metric value; names other than train/loss, val/loss,
  // tokens_per_sec and lr are ignored.
  void TrialMetric(int64_t trial_id, const TrialLabels& labels, const std::string& name,
                   double value);
  // A running trial's latest per-layer values of one diag row (layer, sublayer), as
  // spheret_layer_value{layer, sublayer, field}, and hidden_norm and theta of attn and mlp rows
  // also as spheret_hidden_norm and spheret_rotation_angle_radians. A value is exported only when
  // its field is one of ExportedLayerFields() and its layer lies within the trial's `depth`
  // (n_layer x loops; 0 when unknown, which exports none; DiagRowWithinDepth): attn and mlp
  // layers in [1, depth], model 0, dyadic in [1, 2 depth]; any other is counted in
  // spheret_layer_values_unexported_total{reason="field"|"layer"}. O(1) per value.
  void TrialLayerValues(int64_t trial_id, const TrialLabels& labels, int64_t depth, int64_t layer,
                        const std::string& sublayer,
                        const std::vector<std::pair<std::string, double>>& values);
  // Per-layer values of rows beyond the trial's depth that were dropped before they were stored
  // (counted with reason="layer").
  void AddDroppedLayerValues(int64_t count);
  // Drops the trial's gauges, in O(their number).
  void TrialEnded(int64_t trial_id);

 private:
  void SetLayerValue(int64_t trial_id, const TrialLabels& labels, int64_t layer,
                     const std::string& sublayer, const std::string& field, double value);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<TrialSeries> trial_series_;
  std::shared_ptr<prometheus::Collectable> exported_;
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Family<prometheus::Gauge>& eval_jobs_;
  prometheus::Gauge& queue_depth_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Gauge>& slots_;
  prometheus::Histogram& schedule_latency_;
  prometheus::Counter& lease_expirations_;
  prometheus::Counter& stalls_;
  prometheus::Counter& stall_seconds_;
  prometheus::Counter& metric_rows_;
  prometheus::Family<prometheus::Counter>& pruned_;
  prometheus::Family<prometheus::Counter>& iters_saved_;
  prometheus::Family<prometheus::Gauge>& rung_trials_;
  prometheus::Histogram& commit_seconds_;
  prometheus::Family<prometheus::Counter>& unexported_;
  prometheus::Counter& unexported_field_;
  prometheus::Counter& unexported_layer_;
  // The running trials' gauge families (indices into trial_series_).
  const int train_loss_, val_loss_, tokens_per_second_, learning_rate_;
  const int hidden_norm_, rotation_angle_, layer_value_;
};

}  // namespace spheret::metrics
