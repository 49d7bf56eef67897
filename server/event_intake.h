// The coordinator's intake of an attempt's events (server/coordinator.h's Ingest): checked
// against the protocol's diag rules, trimmed to the trial's depth, stored, judged by its search,
// and exported to the running trial's gauges.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/coordinator_state.h"
#include "server/domain/records.h"
#include "server/live_trials.h"
#include "server/searches.h"

namespace spheret {

class EventIntake {
 public:
  // None of the pointers is owned; all outlive it.
  EventIntake(CoordinatorState* state, LiveTrials* live, Searches* searches)
      : state_(*state), live_(*live), searches_(*searches) {}

  // Coordinator::Ingest.
  absl::StatusOr<int64_t> Ingest(const EventBatchRecord& batch, const std::string& worker_id);

 private:
  // Where a batch goes: its trial's gauges and sweep, and what becomes of its rows.
  struct Target {
    LiveTrials::Trial live;  // its gauges' labels and its depth
    int64_t sweep_id = 0;
    int64_t evals_of = 0;  // an evaluation job's scores belong to the trial it scores
    bool judged = false;   // a search trial of an ASHA sweep: its metric is judged at rungs
    bool lapsed = false;   // a lapsed attempt's (Scheduler::LapsedTrial): stored, not exported
  };
  // The batch's target: FailedPrecondition for a stale attempt, or when `worker_id` (unless "")
  // holds no lease on it. Takes the lock.
  absl::StatusOr<Target> Locate(const EventBatchRecord& batch, const std::string& worker_id);
  // The stored rows of a running trial's batch on its gauges.
  void Export(int64_t trial_id, const LiveTrials::Trial& live, const EventBatchRecord& kept);

  CoordinatorState& state_;
  LiveTrials& live_;
  Searches& searches_;
};

}  // namespace spheret
