// Sweeps submitted and cancelled (server/coordinator.h's Submit, CancelSweep, CancelTrial): a
// sweep file parsed, validated, expanded and stored, its trials handed to the scheduler; cancel
// decisions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/coordinator_state.h"
#include "server/decisions.h"
#include "server/sweep/connection_files.h"

namespace spheret {

class Submissions {
 public:
  // Neither pointer is owned; both outlive it.
  Submissions(CoordinatorState* state, Decisions* decisions)
      : state_(*state), decisions_(*decisions) {}

  absl::StatusOr<SubmitResult> Submit(const std::string& spec_yaml,
                                      const std::string& idempotency_key, bool dry_run,
                                      const Interrupt& interrupt, const ConnectionFiles& files);
  absl::StatusOr<sched::CancelResult> CancelSweep(int64_t sweep_id);
  absl::StatusOr<sched::CancelResult> CancelTrial(int64_t trial_id);

 private:
  CoordinatorState& state_;
  Decisions& decisions_;
};

}  // namespace spheret
