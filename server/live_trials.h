// The running trials' gauges (server/coordinator.h): what each needs (its labels, its model's
// depth), from the moment it runs until it ends, and the diag rows dropped as beyond its depth.
// Its *Locked members run with CoordinatorState::mutex held.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/coordinator_state.h"
#include "server/domain/records.h"
#include "server/metrics/metrics.h"

namespace spheret {

class LiveTrials {
 public:
  // What the gauges of a running trial need.
  struct Trial {
    metrics::TrialLabels labels;
    int64_t depth = 0;                 // its model's n_layer x loops (0: unknown)
    bool dropped_rows_logged = false;  // rows beyond its depth were dropped, and it was said
  };

  explicit LiveTrials(CoordinatorState* state) : state_(*state) {}

  // Forgets every trial (the scheduler is being rebuilt), dropping no gauge.
  void ClearLocked() { live_.clear(); }
  bool TrackedLocked(int64_t trial_id) const { return live_.count(trial_id) != 0; }
  // The tracked trial; one not tracked yet is tracked from now on (no labels, depth 0), so that
  // its gauges go when it ends.
  Trial GetLocked(int64_t trial_id) { return live_[trial_id]; }
  // Starts tracking a trial that now runs (its labels and depth from its typed config).
  void TrackRunningLocked(const TrialRecord& trial, const std::string& sweep_name);
  // Tracks the trials a decision made RUNNING again (revived lapsed attempts).
  void TrackRevivedLocked(const Changes& changes);
  // Stops tracking the trials of `trials` that no longer run, and drops their gauges.
  void ForgetEndedLocked(const std::vector<TrialRecord>& trials);
  // Counts the `values` of diag rows of a trial dropped as beyond its `depth`, and says so once
  // per trial. Takes the lock.
  void DroppedRows(int64_t trial_id, int64_t depth, int64_t values);

 private:
  CoordinatorState& state_;
  std::map<int64_t, Trial> live_;  // by trial id
};

}  // namespace spheret
