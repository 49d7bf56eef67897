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
#include <mutex>
#include <string>
#include <vector>

namespace spheret::metrics {

// The labels of a running trial's gauges: sweep, method, scale, p, seed and trial (its id). The
// series of a trial exist only while it runs (TrialEnded drops them), so their
// number is bounded by the running trials, not by the database's history.
using TrialLabels = std::map<std::string, std::string>;

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(const std::string& version);
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // Trials per state name (TrialStateName); every state is exported, absent ones as 0.
  void SetTrialCounts(const std::map<std::string, int64_t>& by_state);
  void SetQueueDepth(int64_t pending);
  void SetWorkers(int64_t alive, int64_t stale);
  void SetSlots(int64_t busy, int64_t free);
  void ObserveScheduleLatency(double seconds);
  void AddLeaseExpirations(int64_t count);
  void AddMetricRows(int64_t count);
  void ObserveCommit(double seconds);

  // A running trial's latest metric value; names other than train/loss, val/loss,
  // tokens_per_sec, lr and the diag metrics gate_choice and jacobian_cond (per layer and
  // sublayer, protocol::ParseDiagMetricName) are ignored.
  void TrialMetric(int64_t trial_id, const TrialLabels& labels, const std::string& name,
                   double value);
  // A running trial's per-layer geometry (from `diag` events).
  void TrialGeometry(int64_t trial_id, const TrialLabels& labels, int64_t layer,
                     const std::string& sublayer, double hidden_norm, double theta);
  void TrialEnded(int64_t trial_id);

 private:
  prometheus::Gauge& TrialGauge(prometheus::Family<prometheus::Gauge>& family, int64_t trial_id,
                                const TrialLabels& labels);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Gauge& queue_depth_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Gauge>& slots_;
  prometheus::Histogram& schedule_latency_;
  prometheus::Counter& lease_expirations_;
  prometheus::Counter& metric_rows_;
  prometheus::Histogram& commit_seconds_;
  prometheus::Family<prometheus::Gauge>& train_loss_;
  prometheus::Family<prometheus::Gauge>& val_loss_;
  prometheus::Family<prometheus::Gauge>& tokens_per_second_;
  prometheus::Family<prometheus::Gauge>& learning_rate_;
  prometheus::Family<prometheus::Gauge>& hidden_norm_;
  prometheus::Family<prometheus::Gauge>& rotation_angle_;
  prometheus::Family<prometheus::Gauge>& gate_choice_;
  prometheus::Family<prometheus::Gauge>& jacobian_cond_;

  std::mutex mutex_;
  // The gauges each running trial owns, to remove them when it ends.
  std::map<int64_t,
           std::vector<std::pair<prometheus::Family<prometheus::Gauge>*, prometheus::Gauge*>>>
      trial_gauges_;
};

}  // namespace spheret::metrics
