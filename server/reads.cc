#include "server/reads.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "protocol/diag_values.h"
#include "server/curve_downsample.h"

namespace spheret {

absl::StatusOr<SweepView> Reads::GetSweep(int64_t sweep_id) {
  SweepView view;
  SPHERET_ASSIGN_OR_RETURN(view.sweep, store_->GetSweep(sweep_id));
  SPHERET_ASSIGN_OR_RETURN(view.counts, store_->CountTrials(sweep_id));
  return view;
}

absl::StatusOr<std::vector<SweepView>> Reads::ListSweeps(int64_t after_sweep_id, int limit) {
  SPHERET_ASSIGN_OR_RETURN(std::vector<SweepRecord> sweeps,
                           store_->ListSweeps(after_sweep_id, limit));
  std::vector<SweepView> views;
  for (SweepRecord& sweep : sweeps) {
    SPHERET_ASSIGN_OR_RETURN(auto counts, store_->CountTrials(sweep.sweep_id));
    views.push_back({std::move(sweep), std::move(counts)});
  }
  return views;
}

absl::StatusOr<std::vector<TrialView>> Reads::ListTrials(const store::TrialQuery& query) {
  SPHERET_ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store_->ListTrials(query));
  std::vector<TrialView> views;
  for (TrialRecord& trial : trials) {
    SPHERET_ASSIGN_OR_RETURN(auto summaries, store_->Summaries(trial.trial_id));
    views.push_back({std::move(trial), std::move(summaries)});
  }
  return views;
}

absl::StatusOr<TrialLogs> Reads::GetTrialLogs(int64_t trial_id) {
  SPHERET_ASSIGN_OR_RETURN(std::optional<TrialRecord> trial, store_->GetTrial(trial_id));
  if (!trial) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  TrialLogs logs;
  logs.trial.trial = std::move(*trial);
  SPHERET_ASSIGN_OR_RETURN(logs.trial.summaries, store_->Summaries(trial_id));
  SPHERET_ASSIGN_OR_RETURN(logs.attempts, store_->Attempts(trial_id));
  return logs;
}

absl::StatusOr<EventPage> Reads::TrialEvents(int64_t trial_id, const EventPageQuery& query) {
  return store_->Events(trial_id, query);
}

absl::StatusOr<std::vector<TrialResult>> Reads::ListResults(const store::TrialQuery& query) {
  if (query.sweep_id <= 0) {  // 0 would walk every trial of the database
    return absl::InvalidArgumentError("sweep_id is required (> 0)");
  }
  store::TrialQuery page = query;
  page.states.clear();
  page.trainings_only = true;  // an evaluation job's scores are its trial's
  SPHERET_ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store_->ListTrials(page));
  std::vector<TrialResult> results(trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    results[i].trial.trial = std::move(trials[i]);
    const int64_t trial_id = results[i].trial.trial.trial_id;
    SPHERET_ASSIGN_OR_RETURN(results[i].trial.summaries, store_->Summaries(trial_id));
    SPHERET_ASSIGN_OR_RETURN(results[i].evals, store_->Evals(trial_id));
  }
  return results;
}

absl::Status Reads::ForEachCurve(
    int64_t sweep_id, const std::string& metric, int64_t max_points,
    const std::function<absl::Status(const TrialRecord&, const CurveRecord&, int64_t)>& visit) {
  SPHERET_RETURN_IF_ERROR(CheckMaxPoints(max_points));
  SPHERET_RETURN_IF_ERROR(store_->GetSweep(sweep_id).status());
  // A page of trials at a time, one curve in memory at a time.
  return ForEachTrial(*store_, sweep_id, [&](const TrialRecord& trial) -> absl::Status {
    SPHERET_ASSIGN_OR_RETURN(CurveRecord curve, store_->Curve(trial.trial_id, metric));
    if (curve.steps.empty()) return absl::OkStatus();
    const auto points = static_cast<int64_t>(curve.steps.size());
    return visit(trial, DownsampleCurve(std::move(curve), max_points), points);
  });
}

absl::Status Reads::ForEachLayerSeries(
    int64_t sweep_id, const LayerValueQuery& query,
    const std::function<absl::Status(const TrialRecord&, const std::vector<LayerSeries>&)>& visit) {
  if (!protocol::IsDiagFieldName(query.field)) {
    return absl::InvalidArgumentError(
        "field must be 1 to 40 of [a-z0-9_] (a diag field such as hidden_norm), got '" +
        query.field.substr(0, 40) + "'");
  }
  if (!query.sublayer.empty() && !protocol::IsDiagSublayer(query.sublayer)) {
    return absl::InvalidArgumentError("sublayer must be attn, mlp, model, dyadic or empty");
  }
  SPHERET_RETURN_IF_ERROR(store_->GetSweep(sweep_id).status());
  return ForEachTrial(*store_, sweep_id, [&](const TrialRecord& trial) -> absl::Status {
    SPHERET_ASSIGN_OR_RETURN(std::vector<LayerSeries> series,
                             store_->LayerValues(trial.trial_id, query));
    if (series.empty()) return absl::OkStatus();
    return visit(trial, series);
  });
}

std::unique_ptr<SweepWatch> Reads::Watch(int64_t sweep_id) {
  return std::make_unique<SweepWatch>(store_, store_, sweep_id);
}

}  // namespace spheret
