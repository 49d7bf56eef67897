#include "server/metrics/metrics.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "protocol/metric_catalog.h"
#include "protocol/trainer_events.h"
#include "server/domain/records.h"

namespace spheret::metrics {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry,
                                                   const std::string& name,
                                                   const std::string& help) {
  return BuildGauge().Name(name).Help(help).Register(registry);
}

const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

bool IsExportedField(std::string_view field) {
  static const auto* const kFields = [] {
    auto* fields = new absl::flat_hash_set<std::string_view>();
    for (const std::string& name : ExportedLayerFields()) fields->insert(name);
    return fields;
  }();
  return kFields->contains(field);
}

// The registry's families, then the running trials' gauges.
class Exported : public prometheus::Collectable {
 public:
  Exported(std::shared_ptr<prometheus::Registry> registry, std::shared_ptr<TrialSeries> trials)
      : registry_(std::move(registry)), trials_(std::move(trials)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    for (prometheus::MetricFamily& family : trials_->Collect()) {
      families.push_back(std::move(family));
    }
    return families;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<TrialSeries> trials_;
};

}  // namespace

const std::vector<std::string>& ExportedLayerFields() {
  // The catalog's diag fields marked exported, in its order: the connection's geometry, Proposition
  // 6, the Jacobians' sigma_min as an interval (and the bare fp32 estimate of older trainers),
  // the model and dyadic rows' values, AutoNorm's gates.
  static const std::vector<std::string> kFields = protocol::MetricNames(
      {protocol::Level::kLayer, protocol::Level::kModel, protocol::Level::kDyadic},
      /*exported_only=*/true);
  return kFields;
}

CoordinatorMetrics::CoordinatorMetrics(const std::string& version)
    : registry_(std::make_shared<prometheus::Registry>()),
      trial_series_(std::make_shared<TrialSeries>()),
      exported_(std::make_shared<Exported>(registry_, trial_series_)),
      trials_(
          GaugeFamily(*registry_, "spheret_trials", "Trials by state (evaluation jobs included).")),
      eval_jobs_(GaugeFamily(*registry_, "spheret_eval_jobs",
                             "Zero-shot evaluation jobs (spheret eval) by state.")),
      queue_depth_(
          GaugeFamily(*registry_, "spheret_queue_depth", "Trials waiting for a slot (PENDING).")
              .Add({})),
      workers_(GaugeFamily(*registry_, "spheret_workers",
                           "Registered workers by state (alive: heartbeat within the lease TTL).")),
      slots_(GaugeFamily(*registry_, "spheret_slots", "Slots of alive workers by state.")),
      schedule_latency_(BuildHistogram()
                            .Name("spheret_schedule_latency_seconds")
                            .Help("Time to answer Acquire, commit included.")
                            .Register(*registry_)
                            .Add({}, kLatencyBuckets)),
      lease_expirations_(BuildCounter()
                             .Name("spheret_lease_expirations_total")
                             .Help("Leases that expired without a heartbeat.")
                             .Register(*registry_)
                             .Add({})),
      stalls_(BuildCounter()
                  .Name("spheret_coordinator_stalls_total")
                  .Help("Stalls of the coordinator itself (no decision for longer than its stall "
                        "threshold: paused, swapped out); each renews the live leases.")
                  .Register(*registry_)
                  .Add({})),
      stall_seconds_(BuildCounter()
                         .Name("spheret_coordinator_stall_seconds_total")
                         .Help("Seconds the coordinator's stalls lasted.")
                         .Register(*registry_)
                         .Add({})),
      metric_rows_(BuildCounter()
                       .Name("spheret_metric_rows_ingested_total")
                       .Help("New metric rows stored (replays not counted).")
                       .Register(*registry_)
                       .Add({})),
      pruned_(BuildCounter()
                  .Name("spheret_trials_pruned_total")
                  .Help("Trials an ASHA search stopped at a rung (PRUNED), by sweep.")
                  .Register(*registry_)),
      iters_saved_(BuildCounter()
                       .Name("spheret_search_iters_saved_total")
                       .Help("Training iterations that trials stopped by ASHA did not run (their "
                             "max_iters less the step they were stopped at), by sweep.")
                       .Register(*registry_)),
      rung_trials_(GaugeFamily(*registry_, "spheret_search_rung_trials",
                               "Trials an ASHA search has judged at each rung, by sweep.")),
      commit_seconds_(BuildHistogram()
                          .Name("spheret_db_commit_seconds")
                          .Help("Duration of one SQLite write transaction.")
                          .Register(*registry_)
                          .Add({}, kLatencyBuckets)),
      unexported_(BuildCounter()
                      .Name("spheret_layer_values_unexported_total")
                      .Help("Per-layer values not exported, by reason: a field not on the "
                            "exported list (stored), or a row beyond the trial's depth (dropped, "
                            "not stored either).")
                      .Register(*registry_)),
      unexported_field_(unexported_.Add({{"reason", "field"}})),
      unexported_layer_(unexported_.Add({{"reason", "layer"}})),
      train_loss_(
          trial_series_->AddFamily("spheret_train_loss", "Latest train/loss of a running trial.")),
      val_loss_(
          trial_series_->AddFamily("spheret_val_loss", "Latest val/loss of a running trial.")),
      tokens_per_second_(trial_series_->AddFamily(
          "spheret_tokens_per_second", "Latest training throughput of a running trial.")),
      learning_rate_(trial_series_->AddFamily("spheret_learning_rate",
                                              "Latest learning rate of a running trial.")),
      hidden_norm_(trial_series_->AddFamily(
          "spheret_hidden_norm",
          "Mean hidden-state norm after a layer's sublayer, running trials.")),
      rotation_angle_(trial_series_->AddFamily(
          "spheret_rotation_angle_radians",
          "Mean rotation angle of a layer's sphere update, running trials.")),
      layer_value_(trial_series_->AddFamily(
          "spheret_layer_value",
          "Latest per-layer value of a running trial, by field (a diag event's value; layer 0 "
          "with sublayer model: whole-model values).")) {
  GaugeFamily(*registry_, "spheret_build_info", "The coordinator's version.")
      .Add({{"version", version}})
      .Set(1);
}

void CoordinatorMetrics::SetTrialCounts(const std::map<std::string, int64_t>& by_state) {
  for (TrialState value : kTrialStates) {
    const char* state = TrialStateName(value);
    auto found = by_state.find(state);
    trials_.Add({{"state", state}}).Set(found == by_state.end() ? 0 : found->second);
  }
}

void CoordinatorMetrics::SetEvalJobCounts(const std::map<std::string, int64_t>& by_state) {
  for (TrialState value : kTrialStates) {
    const char* state = TrialStateName(value);
    auto found = by_state.find(state);
    eval_jobs_.Add({{"state", state}}).Set(found == by_state.end() ? 0 : found->second);
  }
}

void CoordinatorMetrics::SetQueueDepth(int64_t pending) { queue_depth_.Set(pending); }

void CoordinatorMetrics::SetWorkers(int64_t alive, int64_t stale) {
  workers_.Add({{"state", "alive"}}).Set(alive);
  workers_.Add({{"state", "stale"}}).Set(stale);
}

void CoordinatorMetrics::SetSlots(int64_t busy, int64_t free) {
  slots_.Add({{"state", "busy"}}).Set(busy);
  slots_.Add({{"state", "free"}}).Set(free);
}

void CoordinatorMetrics::ObserveScheduleLatency(double seconds) {
  schedule_latency_.Observe(seconds);
}
void CoordinatorMetrics::AddLeaseExpirations(int64_t count) { lease_expirations_.Increment(count); }
void CoordinatorMetrics::AddStall(double seconds) {
  stalls_.Increment();
  stall_seconds_.Increment(seconds);
}
void CoordinatorMetrics::AddMetricRows(int64_t count) { metric_rows_.Increment(count); }
void CoordinatorMetrics::ObserveCommit(double seconds) { commit_seconds_.Observe(seconds); }
void CoordinatorMetrics::TrialPruned(const std::string& sweep, int64_t step, int64_t max_iters) {
  pruned_.Add({{"sweep", sweep}}).Increment();
  iters_saved_.Add({{"sweep", sweep}})
      .Increment(static_cast<double>(std::max<int64_t>(max_iters - step, 0)));
}
void CoordinatorMetrics::SetRungTrials(const std::string& sweep, int rung, int64_t trials) {
  rung_trials_.Add({{"sweep", sweep}, {"rung", std::to_string(rung)}})
      .Set(static_cast<double>(trials));
}

void CoordinatorMetrics::TrialMetric(int64_t trial_id, const TrialLabels& labels,
                                     const std::string& name, double value) {
  int family = -1;
  if (name == protocol::kTrainLoss) family = train_loss_;
  if (name == protocol::kValLoss) family = val_loss_;
  if (name == protocol::kTokensPerSec) family = tokens_per_second_;
  if (name == protocol::kLearningRate) family = learning_rate_;
  if (family < 0) return;
  trial_series_->Set(trial_id, labels, {family, 0, "", ""}, value);
}

void CoordinatorMetrics::TrialLayerValues(
    int64_t trial_id, const TrialLabels& labels, int64_t depth, int64_t layer,
    const std::string& sublayer, const std::vector<std::pair<std::string, double>>& values) {
  if (!DiagRowWithinDepth(depth, layer, sublayer)) {
    unexported_layer_.Increment(static_cast<double>(values.size()));
    return;
  }
  for (const auto& [field, value] : values) {
    if (!IsExportedField(field)) {
      unexported_field_.Increment();
      continue;
    }
    SetLayerValue(trial_id, labels, layer, sublayer, field, value);
  }
}

void CoordinatorMetrics::AddDroppedLayerValues(int64_t count) {
  unexported_layer_.Increment(static_cast<double>(count));
}

void CoordinatorMetrics::SetLayerValue(int64_t trial_id, const TrialLabels& labels, int64_t layer,
                                       const std::string& sublayer, const std::string& field,
                                       double value) {
  trial_series_->Set(trial_id, labels, {layer_value_, layer, sublayer, field}, value);
  // The geometry families of earlier versions, for the attn and mlp rows.
  if (sublayer != protocol::kAttnSublayer && sublayer != protocol::kMlpSublayer) return;
  const int legacy = field == protocol::kHiddenNorm ? hidden_norm_
                     : field == protocol::kTheta    ? rotation_angle_
                                                    : -1;
  if (legacy >= 0) trial_series_->Set(trial_id, labels, {legacy, layer, sublayer, ""}, value);
}

void CoordinatorMetrics::TrialEnded(int64_t trial_id) { trial_series_->Remove(trial_id); }

}  // namespace spheret::metrics
