#include "server/metrics/trial_series.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>

#include <algorithm>

namespace spheret::metrics {
namespace {

// One exported series: the trial's labels, then those of its key, sorted by name.
prometheus::ClientMetric Series(const TrialLabels& trial, int64_t layer,
                                const std::string& sublayer, const std::string& field,
                                double value) {
  TrialLabels labels = trial;
  if (!sublayer.empty()) {
    labels["layer"] = std::to_string(layer);
    labels["sublayer"] = sublayer;
  }
  if (!field.empty()) labels["field"] = field;
  prometheus::ClientMetric metric;
  for (const auto& [name, text] : labels) metric.label.push_back({name, text});
  metric.gauge.value = value;
  return metric;
}

}  // namespace

int TrialSeries::AddFamily(const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lock(mutex_);
  families_.emplace_back(name, help);
  return static_cast<int>(families_.size()) - 1;
}

void TrialSeries::Set(int64_t trial_id, const TrialLabels& labels, const Key& key, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [trial, added] = trials_.try_emplace(trial_id);
  if (added) trial->second.labels = labels;
  auto [series, is_new] = trial->second.values.insert_or_assign(
      SeriesKey{key.family, key.layer, key.sublayer, key.field}, value);
  if (is_new) ++size_;
}

void TrialSeries::Remove(int64_t trial_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = trials_.find(trial_id);
  if (found == trials_.end()) return;
  size_ -= found->second.values.size();
  trials_.erase(found);
}

size_t TrialSeries::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return size_;
}

std::vector<prometheus::MetricFamily> TrialSeries::Collect() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<prometheus::MetricFamily> families(families_.size());
  for (size_t i = 0; i < families_.size(); ++i) {
    families[i].name = families_[i].first;
    families[i].help = families_[i].second;
    families[i].type = prometheus::MetricType::Gauge;
  }
  for (const auto& [trial_id, trial] : trials_) {
    for (const auto& [key, value] : trial.values) {
      const auto& [family, layer, sublayer, field] = key;
      families[family].metric.push_back(Series(trial.labels, layer, sublayer, field, value));
    }
  }
  families.erase(std::remove_if(families.begin(), families.end(),
                                [](const prometheus::MetricFamily& f) { return f.metric.empty(); }),
                 families.end());
  return families;
}

}  // namespace spheret::metrics
