// `spheret eval` (server/coordinator.h's Evaluate): zero-shot evaluation jobs for the finished
// trials of a sweep. A job is a trial of the sweep (eval_of, eval_step set) whose config is its
// trial's with the tasks to score, derived from the trial's typed config; it is leased, retried
// and stored like any trial, and its scores are stored against the trial it scores. A trial's
// checkpoint is scored once per task: a task already scored at that step, or being scored by a
// live job, gets no new job.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/coordinator_state.h"
#include "server/decisions.h"
#include "server/domain/records.h"

namespace spheret {

// What the worker of an evaluation job runs (nothing for a training trial); `trial` typed.
EvalWork EvalWorkOf(const TrialRecord& trial);

class Evaluations {
 public:
  // Neither pointer is owned; both outlive it.
  Evaluations(CoordinatorState* state, Decisions* decisions)
      : state_(*state), decisions_(*decisions) {}

  // Coordinator::Evaluate.
  absl::StatusOr<std::vector<EvalPlan>> Evaluate(const EvalRequest& request);

 private:
  // Why `trial` gets no (further) evaluation job (its `plan` says), or the job's spec; `trials`
  // are its sweep's, typed.
  absl::StatusOr<std::optional<TrialSpec>> PlanEvaluation(const TrialRecord& trial,
                                                          const std::vector<TrialRecord>& trials,
                                                          const EvalRequest& request,
                                                          EvalPlan* plan);
  // The tasks scored without error on `trial_id`'s checkpoint of `step`.
  absl::StatusOr<std::set<std::string>> ScoredTasks(int64_t trial_id, int64_t step);

  CoordinatorState& state_;
  Decisions& decisions_;
};

}  // namespace spheret
