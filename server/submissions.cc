#include "server/submissions.h"

#include "base/status_macros.h"
#include "server/sweep/sweep_expand.h"

namespace spheret {
namespace {

// The sweep record of a submitted `spec` (its file `spec_yaml`), before the store gives it an id.
SweepRecord SweepOf(const SweepSpec& spec, const std::string& spec_yaml,
                    const std::string& idempotency_key) {
  SweepRecord sweep;
  sweep.name = spec.name;
  sweep.spec_yaml = spec_yaml;
  sweep.idempotency_key = idempotency_key;
  sweep.priority = spec.priority;
  sweep.max_restarts = spec.max_restarts;
  sweep.gpus = spec.resources.gpus;
  sweep.slots_per_node = spec.resources.SlotsPerNode();
  sweep.nodes = spec.resources.nodes;
  sweep.metric = spec.metric;
  sweep.minimize = spec.minimize;
  sweep.search = spec.search;
  return sweep;
}

}  // namespace

absl::StatusOr<SubmitResult> Submissions::Submit(const std::string& spec_yaml,
                                                 const std::string& idempotency_key, bool dry_run,
                                                 const Interrupt& interrupt,
                                                 const ConnectionFiles& files) {
  SPHERET_ASSIGN_OR_RETURN(SweepSpec spec, ParseSweepSpec(spec_yaml));
  SPHERET_RETURN_IF_ERROR(CheckConnectionFiles(files));
  spec.connection_files = files;
  SubmitResult result;
  SPHERET_ASSIGN_OR_RETURN(result.trials,
                           ExpandSweep(spec, state_.options.limits, interrupt, &result.notices));
  result.trial_count = static_cast<int64_t>(result.trials.size());
  if (dry_run) return result;
  SPHERET_ASSIGN_OR_RETURN(store::SubmitOutcome outcome,
                           state_.store->SubmitSweep(SweepOf(spec, spec_yaml, idempotency_key),
                                                     result.trials, state_.clock->NowMs()));
  decisions_.Admit(outcome);
  result.sweep_id = outcome.sweep.sweep_id;
  result.trial_count = outcome.trial_count;
  result.created_trials = static_cast<int64_t>(outcome.created.size());
  return result;
}

absl::StatusOr<sched::CancelResult> Submissions::CancelSweep(int64_t sweep_id) {
  sched::CancelResult result;
  SPHERET_RETURN_IF_ERROR(decisions_.Decide([&](int64_t /*now*/, Changes* changes) -> absl::Status {
    SPHERET_ASSIGN_OR_RETURN(result, state_.scheduler.CancelSweep(sweep_id, changes));
    ++state_.versions[sweep_id];
    return absl::OkStatus();
  }));
  state_.changed.notify_all();
  return result;
}

absl::StatusOr<sched::CancelResult> Submissions::CancelTrial(int64_t trial_id) {
  sched::CancelResult result;
  SPHERET_RETURN_IF_ERROR(decisions_.Decide([&](int64_t /*now*/, Changes* changes) -> absl::Status {
    result = state_.scheduler.CancelTrial(trial_id, changes);
    return absl::OkStatus();
  }));
  return result;
}

}  // namespace spheret
