// The coordinator's searches (server/coordinator.h): ASHA's rung verdicts on search trials as
// their metric arrives (server/sched/rungs.h), hand resumes of pruned trials, and the confirm
// trials of groups whose search has ended. Its *Locked members run with CoordinatorState::mutex
// held.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/coordinator_state.h"
#include "server/decisions.h"
#include "server/domain/records.h"
#include "server/sched/rungs.h"

namespace spheret {

class Searches {
 public:
  // Neither pointer is owned; both outlive it.
  Searches(CoordinatorState* state, Decisions* decisions)
      : state_(*state), decisions_(*decisions) {}

  // Rebuilds the rung boards of the active searches from the store.
  absl::Status LoadRungsLocked();
  // Notes the sweeps whose search trials ended among `trials` (their confirm trials are due).
  void NoteEndedLocked(const std::vector<TrialRecord>& trials);
  // Judges a batch's rows when its trial is a live ASHA search trial (a decision of its own).
  absl::Status JudgeBatch(const EventBatchRecord& batch);
  // Coordinator::Resume: a PRUNED trial leased again, never stopped by its search again.
  absl::StatusOr<TrialRecord> Resume(int64_t trial_id);
  // Coordinator::ConfirmDue: the confirm trials of each search group that has ended since the
  // last call (every sweep's the first time).
  void ConfirmDue();

 private:
  // Judges the search metric's rows of a live search trial's batch at its rungs; inside a
  // decision.
  void JudgeLocked(const TrialRecord& trial, const std::vector<MetricRow>& rows, Changes* changes);
  // The max_iters of a search trial's resolved config (0 when it does not resolve), read once.
  int64_t MaxItersLocked(const TrialRecord& trial);
  // The values recorded at `rung` over every group of a sweep's search.
  int64_t TrialsAtRungLocked(int64_t sweep_id, int rung) const;
  // Adds the confirm trials of the ended groups of one sweep (ConfirmDue).
  absl::Status Confirm(int64_t sweep_id);

  CoordinatorState& state_;
  Decisions& decisions_;
  // The values recorded at each rung, per (sweep, search group) of active searches.
  std::map<std::pair<int64_t, std::string>, sched::RungBoard> boards_;
  std::map<int64_t, int64_t> max_iters_;  // of search trials judged so far, by trial
  std::set<int64_t> confirm_due_;         // sweeps whose search trials ended since ConfirmDue
  bool confirm_all_ = true;               // ConfirmDue's first call checks every sweep
};

}  // namespace spheret
