// The coordinator's lease keeping (server/coordinator.h): workers registering and heartbeating,
// leases granted (with an evaluation job's work) and handed back, attempts ending, and the
// housekeeping pass (lease expiry, gauges, the liveness mark).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/coordinator_state.h"
#include "server/decisions.h"
#include "server/domain/records.h"
#include "server/live_trials.h"
#include "server/searches.h"

namespace spheret {

class LeaseKeeper {
 public:
  // None of the pointers is owned; all outlive it.
  LeaseKeeper(CoordinatorState* state, Decisions* decisions, LiveTrials* live, Searches* searches)
      : state_(*state), decisions_(*decisions), live_(*live), searches_(*searches) {}

  // Coordinator::Register, Heartbeat, Acquire and Finish.
  absl::StatusOr<std::vector<sched::AttemptId>> Register(
      const WorkerRecord& worker, const std::vector<sched::AttemptId>& running,
      const std::vector<sched::AttemptId>& finished);
  absl::StatusOr<sched::HeartbeatResult> Heartbeat(const std::string& worker_id,
                                                   const std::string& instance,
                                                   const std::vector<sched::AttemptId>& running,
                                                   const std::vector<sched::AttemptId>& finished);
  absl::StatusOr<std::vector<Lease>> Acquire(const std::string& worker_id,
                                             const std::string& instance, int free_slots,
                                             int rendezvous_port, int max_trials,
                                             const Interrupt& gone);
  absl::StatusOr<TrialState> Finish(const AttemptEnd& end, const std::string& worker_id);
  // Expires leases, sets the gauges and records the liveness mark.
  void Housekeeping();

 private:
  // The leases a decision grants (and tracks their trials as running); with the lock held.
  absl::StatusOr<std::vector<Lease>> GrantLocked(const std::string& worker_id,
                                                 const std::string& instance, int free_slots,
                                                 int rendezvous_port, int max_trials, int64_t now,
                                                 Changes* changes);
  // Hands back leases granted to a caller that gave up before they were answered.
  void HandBack(const std::vector<Lease>& grants, const std::string& worker_id,
                const absl::Status& why);
  // The gauges of the scheduler's `stats` and of the store's trial and job counts.
  void SetGauges(const sched::SchedulerStats& stats);

  CoordinatorState& state_;
  Decisions& decisions_;
  LiveTrials& live_;
  Searches& searches_;
  std::atomic<bool> liveness_failing_{false};  // the last SetLastAlive failed
};

}  // namespace spheret
