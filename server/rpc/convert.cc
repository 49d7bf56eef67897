#include "server/rpc/convert.h"

#include "base/text_prefix.h"

namespace spheret::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers. The message travels in the trailing metadata,
  // which the client refuses above 8 KiB ("received initial metadata size exceeds limit"): bound
  // it.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      TextPrefix(status.message(), kMaxStatusMessageBytes));
}

v1::TrialState ToProto(TrialState state) {
  switch (state) {
    case TrialState::kPending:
      return v1::TRIAL_STATE_PENDING;
    case TrialState::kRunning:
      return v1::TRIAL_STATE_RUNNING;
    case TrialState::kSucceeded:
      return v1::TRIAL_STATE_SUCCEEDED;
    case TrialState::kFailed:
      return v1::TRIAL_STATE_FAILED;
    case TrialState::kDiverged:
      return v1::TRIAL_STATE_DIVERGED;
    case TrialState::kCancelled:
      return v1::TRIAL_STATE_CANCELLED;
    case TrialState::kPruned:
      return v1::TRIAL_STATE_PRUNED;
  }
  return v1::TRIAL_STATE_UNSPECIFIED;
}

std::optional<TrialState> FromProto(v1::TrialState state) {
  for (TrialState s : kTrialStates) {
    if (ToProto(s) == state) return s;
  }
  return std::nullopt;
}

v1::SweepState ToProto(SweepState state) {
  switch (state) {
    case SweepState::kActive:
      return v1::SWEEP_STATE_ACTIVE;
    case SweepState::kDone:
      return v1::SWEEP_STATE_DONE;
    case SweepState::kCancelled:
      return v1::SWEEP_STATE_CANCELLED;
  }
  return v1::SWEEP_STATE_UNSPECIFIED;
}

void FillTrial(const TrialRecord& trial, const std::map<std::string, MetricSummary>& summaries,
               v1::Trial* out) {
  out->set_trial_id(trial.trial_id);
  out->set_sweep_id(trial.sweep_id);
  out->set_trial_key(trial.trial_key);
  out->set_config_json(trial.config_json);
  out->set_state(ToProto(trial.state));
  out->set_attempt(trial.attempt);
  out->set_error(trial.error);
  out->set_priority(trial.priority);
  out->set_cancel_requested(trial.cancel_requested);
  out->set_eval_of(trial.eval_of);
  out->set_eval_step(trial.eval_step);
  out->set_role(trial.role);
  out->set_search_group(trial.search_group);
  out->set_rung(trial.rung);
  out->set_prune_requested(trial.prune_requested);
  for (const auto& [name, summary] : summaries) {
    v1::MetricValue* value = out->add_latest();
    value->set_name(name);
    value->set_step(summary.last_step);
    value->set_value(summary.last);
  }
}

void FillSweep(const SweepRecord& sweep, const std::map<std::string, int64_t>& counts,
               v1::Sweep* out) {
  out->set_sweep_id(sweep.sweep_id);
  out->set_name(sweep.name);
  out->set_state(ToProto(sweep.state));
  out->set_priority(sweep.priority);
  out->set_submitted_ms(sweep.submitted_ms);
  out->set_search_strategy(sweep.search.strategy);
  out->set_search_min_iters(sweep.search.min_iters);
  out->set_search_reduction_factor(sweep.search.reduction_factor);
  int64_t total = 0;
  for (const auto& [state, count] : counts) {
    (*out->mutable_trials_by_state())[state] = count;
    total += count;
  }
  out->set_trial_count(total);
}

void FillResultRow(const TrialRecord& trial, const std::map<std::string, MetricSummary>& summaries,
                   const std::vector<EvalRecord>& evals, const std::vector<std::string>& metrics,
                   v1::ResultRow* out) {
  out->set_trial_id(trial.trial_id);
  out->set_state(ToProto(trial.state));
  out->set_config_json(trial.config_json);
  out->set_role(trial.role);
  out->set_rung(trial.rung);
  for (const std::string& name : metrics) {
    auto found = summaries.find(name);
    if (found == summaries.end()) continue;
    v1::MetricSummary& summary = (*out->mutable_metrics())[name];
    summary.set_last(found->second.last);
    summary.set_min(found->second.min);
    summary.set_max(found->second.max);
    summary.set_count(found->second.count);
    summary.set_last_step(found->second.last_step);
  }
  for (const EvalRecord& eval : evals) {
    v1::EvalScore* score = out->add_evals();
    score->set_task(eval.task);
    score->set_metric(eval.metric);
    score->set_value(eval.value);
    score->set_std_error(eval.std_error);
    score->set_step(eval.step);
    score->set_error(eval.error);
  }
}

void FillAttempt(const AttemptRecord& attempt, v1::AttemptInfo* out) {
  out->set_attempt(attempt.attempt);
  out->set_worker_id(attempt.worker_id);
  out->set_started_ms(attempt.started_ms);
  out->set_ended_ms(attempt.ended_ms);
  out->set_outcome(attempt.outcome);
  out->set_exit_code(attempt.exit_code);
  out->set_stderr_tail(attempt.stderr_tail);
}

EventBatchRecord FromProto(const v1::EventBatch& batch) {
  EventBatchRecord record;
  record.trial_id = batch.trial_id();
  record.attempt = batch.attempt();
  record.metrics.reserve(batch.metrics_size());
  for (const v1::MetricRow& row : batch.metrics()) {
    record.metrics.push_back({row.name(), row.step(), row.value(), row.wall_ms()});
  }
  for (const v1::Event& event : batch.other()) {
    record.other_events.emplace_back(event.seq(), event.json());
    if (event.has_eval()) {
      const v1::EvalScore& e = event.eval();
      record.evals.push_back({e.task(), e.metric(), e.value(), e.std_error(), e.step(), e.error()});
    }
  }
  record.diags.reserve(batch.diags_size());
  for (const v1::DiagRow& row : batch.diags()) {
    DiagRecord& diag = record.diags.emplace_back();
    diag.step = row.step();
    diag.layer = row.layer();
    diag.sublayer = row.sublayer();
    diag.values.reserve(row.values_size());
    for (const v1::DiagValue& value : row.values()) {
      diag.values.emplace_back(value.field(), value.value());
    }
  }
  record.checkpoint_step = batch.checkpoint_step();
  record.checkpoint_path = batch.checkpoint_path();
  return record;
}

LayerValueQuery FromProto(const v1::StreamLayerValuesRequest& request) {
  LayerValueQuery query;
  query.field = request.field();
  query.sublayer = request.sublayer();
  query.min_layer = request.min_layer();
  if (request.max_layer() > 0) query.max_layer = request.max_layer();
  query.min_step = request.min_step();
  if (request.max_step() > 0) query.max_step = request.max_step();
  return query;
}

void FillLayerSeries(const LayerSeries& series, v1::LayerSeries* out) {
  out->set_layer(series.layer);
  out->set_sublayer(series.sublayer);
  out->mutable_steps()->Add(series.steps.begin(), series.steps.end());
  out->mutable_values()->Add(series.values.begin(), series.values.end());
}

}  // namespace spheret::rpc
