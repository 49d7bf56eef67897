// The scheduler's part in a sweep's search (server/sched/rungs.h decides; these apply): a
// verdict on a live trial, a hand resume of a pruned one, and closing a search's sweep.
#include "absl/strings/str_cat.h"
#include "server/sched/scheduler.h"

namespace spheret::sched {

void Scheduler::Judge(int64_t trial_id, int rung, bool prune, Changes* changes) {
  auto found = trials_.find(trial_id);
  if (found == trials_.end()) return;
  TrialRecord& trial = found->second;
  trial.rung = rung;
  if (prune && trial.state == TrialState::kPending)
    return SetTerminal(trial, TrialState::kPruned, changes);
  trial.prune_requested = trial.prune_requested || prune;
  changes->trials.push_back(trial);
}

absl::Status Scheduler::Resume(TrialRecord trial, Changes* changes) {
  auto sweep = sweeps_.find(trial.sweep_id);
  if (trial.state != TrialState::kPruned || sweep == sweeps_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("trial ", trial.trial_id, " is ",
                                                      TrialStateName(trial.state),
                                                      "; only a PRUNED trial resumes"));
  }
  if (sweep->second.record.state == SweepState::kCancelled) {
    return absl::FailedPreconditionError(
        absl::StrCat("trial ", trial.trial_id, ": its sweep ", trial.sweep_id, " is cancelled"));
  }
  trial.state = TrialState::kPending;
  trial.prune_requested = false;
  trial.prune_exempt = true;
  trial.not_before_ms = 0;
  trial.error.clear();
  AddTrial(trial);
  changes->trials.push_back(trial);
  if (sweep->second.record.state == SweepState::kDone) {
    sweep->second.record.state = SweepState::kActive;
    changes->sweeps.emplace_back(trial.sweep_id, SweepState::kActive);
  }
  return absl::OkStatus();
}

void Scheduler::CloseIfIdle(int64_t sweep_id, Changes* changes) {
  auto sweep = sweeps_.find(sweep_id);
  if (sweep == sweeps_.end() || sweep->second.live > 0 ||
      sweep->second.record.state != SweepState::kActive) {
    return;
  }
  sweep->second.record.state = SweepState::kDone;
  changes->sweeps.emplace_back(sweep_id, SweepState::kDone);
}

}  // namespace spheret::sched
