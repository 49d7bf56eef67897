#include "server/metrics/metrics.h"

#include <algorithm>

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

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(const std::string& version)
    : registry_(std::make_shared<prometheus::Registry>()),
      trials_(GaugeFamily(*registry_, "spheret_trials", "Trials by state.")),
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
      metric_rows_(BuildCounter()
                       .Name("spheret_metric_rows_ingested_total")
                       .Help("New metric rows stored (replays not counted).")
                       .Register(*registry_)
                       .Add({})),
      commit_seconds_(BuildHistogram()
                          .Name("spheret_db_commit_seconds")
                          .Help("Duration of one SQLite write transaction.")
                          .Register(*registry_)
                          .Add({}, kLatencyBuckets)),
      train_loss_(
          GaugeFamily(*registry_, "spheret_train_loss", "Latest train/loss of a running trial.")),
      val_loss_(GaugeFamily(*registry_, "spheret_val_loss", "Latest val/loss of a running trial.")),
      tokens_per_second_(GaugeFamily(*registry_, "spheret_tokens_per_second",
                                     "Latest training throughput of a running trial.")),
      learning_rate_(GaugeFamily(*registry_, "spheret_learning_rate",
                                 "Latest learning rate of a running trial.")),
      hidden_norm_(GaugeFamily(*registry_, "spheret_hidden_norm",
                               "Mean hidden-state norm after a layer's sublayer, running trials.")),
      rotation_angle_(
          GaugeFamily(*registry_, "spheret_rotation_angle_radians",
                      "Mean rotation angle of a layer's sphere update, running trials.")),
      gate_choice_(GaugeFamily(*registry_, "spheret_gate_choice",
                               "AutoNorm's chosen norm of a layer's sublayer (0 layernorm, 1 "
                               "rmsnorm, 2 dyt, 3 identity), running trials.")),
      jacobian_cond_(GaugeFamily(*registry_, "spheret_jacobian_cond",
                                 "Condition number estimate of a block's input-output Jacobian "
                                 "(on the block's mlp row), running trials.")) {
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
void CoordinatorMetrics::AddMetricRows(int64_t count) { metric_rows_.Increment(count); }
void CoordinatorMetrics::ObserveCommit(double seconds) { commit_seconds_.Observe(seconds); }

prometheus::Gauge& CoordinatorMetrics::TrialGauge(prometheus::Family<prometheus::Gauge>& family,
                                                  int64_t trial_id, const TrialLabels& labels) {
  prometheus::Gauge& gauge = family.Add(labels);
  auto& owned = trial_gauges_[trial_id];
  const auto entry = std::make_pair(&family, &gauge);
  if (std::find(owned.begin(), owned.end(), entry) == owned.end()) owned.push_back(entry);
  return gauge;
}

void CoordinatorMetrics::TrialMetric(int64_t trial_id, const TrialLabels& labels,
                                     const std::string& name, double value) {
  prometheus::Family<prometheus::Gauge>* family = nullptr;
  if (name == protocol::kTrainLoss) family = &train_loss_;
  if (name == protocol::kValLoss) family = &val_loss_;
  if (name == protocol::kTokensPerSec) family = &tokens_per_second_;
  if (name == protocol::kLearningRate) family = &learning_rate_;
  std::string field, sublayer;
  int64_t layer = 0;
  TrialLabels with_layer = labels;
  if (family == nullptr && protocol::ParseDiagMetricName(name, &field, &layer, &sublayer)) {
    if (field == "gate_choice") family = &gate_choice_;
    if (field == "jacobian_cond") family = &jacobian_cond_;
    with_layer["layer"] = std::to_string(layer);
    with_layer["sublayer"] = sublayer;
  }
  if (family == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  TrialGauge(*family, trial_id, with_layer).Set(value);
}

void CoordinatorMetrics::TrialGeometry(int64_t trial_id, const TrialLabels& labels, int64_t layer,
                                       const std::string& sublayer, double hidden_norm,
                                       double theta) {
  TrialLabels with_layer = labels;
  with_layer["layer"] = std::to_string(layer);
  with_layer["sublayer"] = sublayer;
  std::lock_guard<std::mutex> lock(mutex_);
  TrialGauge(hidden_norm_, trial_id, with_layer).Set(hidden_norm);
  TrialGauge(rotation_angle_, trial_id, with_layer).Set(theta);
}

void CoordinatorMetrics::TrialEnded(int64_t trial_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = trial_gauges_.find(trial_id);
  if (found == trial_gauges_.end()) return;
  for (auto& [family, gauge] : found->second) family->Remove(gauge);
  trial_gauges_.erase(found);
}

}  // namespace spheret::metrics
