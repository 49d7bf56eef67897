// A watch cursor over one sweep: each pass returns the trials that changed since the last
// (state, attempt, or the latest step of any metric), and whether the sweep has ended. Not
// thread-safe: one per watching client.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/records.h"
#include "server/store/store.h"

namespace spheret {

// A trial with the summary of each of its metrics.
struct TrialView {
  TrialRecord trial;
  std::map<std::string, MetricSummary> summaries;
};

struct WatchPass {
  std::vector<TrialView> changed;  // in trial id order
  bool finished = false;           // the sweep is no longer active and every trial has ended
};

class SweepWatch {
 public:
  // `state` and `metrics` must outlive it.
  SweepWatch(store::StateStore* state, store::MetricStore* metrics, int64_t sweep_id)
      : state_(state), metrics_(metrics), sweep_id_(sweep_id) {}

  // NotFound for an unknown sweep.
  absl::StatusOr<WatchPass> Next();

 private:
  store::StateStore* state_;
  store::MetricStore* metrics_;
  int64_t sweep_id_;
  // What the client has seen of each trial: state, attempt and latest step of any metric.
  std::map<int64_t, std::tuple<TrialState, int, int64_t>> sent_;
};

// Calls `visit` on every trial of a sweep in id order, a page at a time, and returns the first
// error it returns.
absl::Status ForEachTrial(store::StateStore& store, int64_t sweep_id,
                          const std::function<absl::Status(const TrialRecord&)>& visit);

}  // namespace spheret
