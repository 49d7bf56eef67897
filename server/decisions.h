// The scheduler's decisions and their commits (server/coordinator.h's contract): every decision
// is committed to the store before its call returns; a decision whose commit fails is undone in
// memory, with every decision queued after it, by reloading the scheduler from the store. Also
// what a decision does first after a stall of the coordinator itself, and the trials a
// submission hands to the scheduler.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "server/coordinator_state.h"
#include "server/domain/records.h"
#include "server/live_trials.h"
#include "server/store/store.h"

namespace spheret {

class Searches;

class Decisions {
 public:
  // None of the pointers is owned; all outlive it (`searches` is used only once it is built).
  Decisions(CoordinatorState* state, LiveTrials* live, Searches* searches)
      : state_(*state), live_(*live), searches_(searches) {}

  // Builds the scheduler from the store at start-up, extending live leases by the downtime since
  // the last liveness mark.
  absl::Status Restore();
  // One scheduler decision: runs `decide(now, changes)` under the lock, queues what it changed to
  // the store in decision order, and waits for the commit (outside the lock, so that concurrent
  // decisions share a transaction). A refusal (an error from `decide`) changes nothing. A failed
  // commit fails every decision queued after it too (Store::Apply); the first caller to see it
  // reloads the scheduler from the store, so memory never runs ahead of the disk, and each
  // caller gets the error.
  absl::Status Decide(const std::function<absl::Status(int64_t now, Changes* changes)>& decide);
  // Hands the trials a submission created to the scheduler (their sweep too, when new or
  // reopened), typed (server/trial_configs.h).
  void Admit(const store::SubmitOutcome& outcome);
  // After a stall, Acquire grants nothing before this time (ms); with the lock held.
  int64_t GrantsFromLocked() const { return grants_from_ms_; }

 private:
  // Rebuilds the scheduler from the store (the last committed state); with the lock held.
  absl::Status LoadLocked(int64_t now, bool after_failed_commit);
  // Loads the scheduler's sweeps, trials (typed), workers and leases from `state`.
  void LoadSchedulerLocked(store::RestoredState& state);
  // Undoes a failed commit (the first caller to see it, `reloads` being the count it saw) by
  // reloading from the store; returns what the caller answers. With the lock held.
  absl::Status UndoLocked(const absl::Status& committed, uint64_t reloads);
  // The first decision after a stall (see CoordinatorOptions::stall_ms) renews the leases of the
  // workers alive before it, into `changes`, logs it and counts it; with the lock held.
  void NoticeStallLocked(int64_t now, Changes* changes);
  // Bumps the sweeps' change counters, notes ended search trials and drops ended trials' gauges;
  // with the lock held.
  void TrackTrialsLocked(const std::vector<TrialRecord>& trials);

  CoordinatorState& state_;
  LiveTrials& live_;
  Searches* searches_;
  uint64_t reloads_ = 0;          // reloads after failed commits (a failure is undone once)
  int64_t last_decision_ms_ = 0;  // the clock at the latest decision (or load)
  int64_t grants_from_ms_ = 0;    // after a stall, Acquire grants nothing before this
};

}  // namespace spheret
