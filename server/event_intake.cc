#include "server/event_intake.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "protocol/diag_values.h"
#include "server/sweep/trial_depth.h"
#include "server/trial_configs.h"

namespace spheret {
namespace {

// InvalidArgument naming the trial, step and field of the first diag row that breaks the rules.
absl::Status CheckDiagRows(const EventBatchRecord& batch) {
  for (const DiagRecord& diag : batch.diags) {
    const std::string error = protocol::DiagRowError(diag.layer, diag.sublayer, diag.values);
    if (!error.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("trial ", batch.trial_id, ": diag row at step ", diag.step, ": ", error));
    }
  }
  return absl::OkStatus();
}

// The batch without its diag rows beyond a model `depth` deep (DiagRowWithinDepth), or nullopt
// when it has none or the depth is unknown (0: stored, not exported); counts their values.
std::optional<EventBatchRecord> DropRowsBeyondDepth(const EventBatchRecord& batch, int64_t depth,
                                                    int64_t* dropped_values) {
  auto beyond = [depth](const DiagRecord& diag) {
    return !DiagRowWithinDepth(depth, diag.layer, diag.sublayer);
  };
  if (depth <= 0 || std::none_of(batch.diags.begin(), batch.diags.end(), beyond)) {
    return std::nullopt;
  }
  EventBatchRecord kept = batch;
  kept.diags.clear();
  for (const DiagRecord& diag : batch.diags) {
    if (beyond(diag)) {
      *dropped_values += static_cast<int64_t>(diag.values.size());
    } else {
      kept.diags.push_back(diag);
    }
  }
  return kept;
}

}  // namespace

absl::StatusOr<EventIntake::Target> EventIntake::Locate(const EventBatchRecord& batch,
                                                        const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(state_.mutex);
  const sched::Scheduler& scheduler = state_.scheduler;
  Target target;
  const TrialRecord* trial = nullptr;
  if (absl::Status held = scheduler.CheckHolder(batch.trial_id, batch.attempt, worker_id);
      held.ok()) {
    target.live = live_.GetLocked(batch.trial_id);  // tracked, so that its gauges go when it ends
    trial = scheduler.FindTrial(batch.trial_id);
  } else {
    trial = scheduler.LapsedTrial(batch.trial_id, batch.attempt, worker_id);
    if (trial == nullptr) return held;
    target.lapsed = true;
    target.live.depth = TrialDepth(ConfigOf(*trial));
  }
  target.sweep_id = trial->sweep_id;
  target.evals_of = trial->eval_of;
  const SweepRecord* sweep = scheduler.FindSweep(target.sweep_id);
  target.judged = !target.lapsed && trial->role == "search" && sweep != nullptr &&
                  sweep->search.asha() && !trial->prune_exempt && !trial->prune_requested &&
                  !batch.metrics.empty();
  return target;
}

absl::StatusOr<int64_t> EventIntake::Ingest(const EventBatchRecord& batch,
                                            const std::string& worker_id) {
  SPHERET_ASSIGN_OR_RETURN(const Target target, Locate(batch, worker_id));
  SPHERET_RETURN_IF_ERROR(CheckDiagRows(batch));
  int64_t dropped = 0;  // values of rows beyond the trial's depth: neither stored nor exported
  std::optional<EventBatchRecord> trimmed = DropRowsBeyondDepth(batch, target.live.depth, &dropped);
  if (target.evals_of > 0) {
    if (!trimmed) trimmed = batch;
    trimmed->evals_of = target.evals_of;
  }
  const EventBatchRecord& kept = trimmed ? *trimmed : batch;
  if (dropped > 0) live_.DroppedRows(batch.trial_id, target.live.depth, dropped);
  SPHERET_ASSIGN_OR_RETURN(int64_t inserted, state_.store->AppendEvents(kept));
  // After the rows are stored; a batch sent again (its answer lost) is judged again, and finds
  // its rungs already judged (the trial's rung count moved past them).
  if (target.judged) SPHERET_RETURN_IF_ERROR(searches_.JudgeBatch(batch));
  state_.metrics->AddMetricRows(inserted);
  // A trial that is not RUNNING has no gauges (they would never be removed).
  if (!target.lapsed) Export(batch.trial_id, target.live, kept);
  state_.Touch(target.sweep_id);
  return inserted;
}

void EventIntake::Export(int64_t trial_id, const LiveTrials::Trial& live,
                         const EventBatchRecord& kept) {
  metrics::CoordinatorMetrics& gauges = *state_.metrics;
  // Each metric's last row of a batch only: a gauge shows the last value, and an export locks.
  std::unordered_set<std::string_view> seen;
  for (auto row = kept.metrics.rbegin(); row != kept.metrics.rend(); ++row) {
    if (seen.insert(row->name).second)
      gauges.TrialMetric(trial_id, live.labels, row->name, row->value);
  }
  for (const DiagRecord& diag : kept.diags) {
    gauges.TrialLayerValues(trial_id, live.labels, live.depth, diag.layer, diag.sublayer,
                            diag.values);
  }
}

}  // namespace spheret
