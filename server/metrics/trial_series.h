// The gauges of running trials (their latest losses, throughput, learning rate and per-layer
// values), kept apart from prometheus-cpp's families: prometheus-cpp 1.0's Family::Remove scans
// the whole family, so ending a trial with N series among M others cost O(N x M) under the lock
// every Ingest takes (removing 20,000 series took 42 s). Here a series is found in O(1), a
// trial's series go in O(their number), and a scrape costs O(all series). Thread-safe.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace spheret::metrics {

// The labels of a running trial's gauges (see CoordinatorMetrics).
using TrialLabels = std::map<std::string, std::string>;

class TrialSeries : public prometheus::Collectable {
 public:
  // One series of a trial: its family (an index from AddFamily) and, for per-layer series, the
  // layer and sublayer (sublayer "" for none) and the field ("" for none), exported as labels
  // beside the trial's own.
  struct Key {
    int family = 0;
    int64_t layer = 0;
    std::string sublayer;
    std::string field;
  };

  // Declares a gauge family (a valid Prometheus name), before the first Set; returns its index.
  int AddFamily(const std::string& name, const std::string& help);
  // Sets the trial's series `key` to `value`, adding it with the trial's `labels` (those of its
  // first series) when it is new.
  void Set(int64_t trial_id, const TrialLabels& labels, const Key& key, double value);
  // Drops every series of the trial.
  void Remove(int64_t trial_id);
  // How many series all running trials have.
  size_t size() const;
  // One gauge family per declared family that has series, with every series' labels sorted.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  using SeriesKey = std::tuple<int, int64_t, std::string, std::string>;
  struct Trial {
    TrialLabels labels;
    absl::flat_hash_map<SeriesKey, double> values;
  };

  std::vector<std::pair<std::string, std::string>> families_;  // (name, help)
  mutable std::mutex mutex_;
  std::unordered_map<int64_t, Trial> trials_;
  size_t size_ = 0;
};

}  // namespace spheret::metrics
