#include <algorithm>
#include <map>

#include "server/rpc/convert.h"
#include "server/rpc/services.h"

namespace spheret::rpc {
namespace {

#define SPHERET_AUTHORIZE(access) \
  if (grpc::Status denied = auth_->Check(context, access); !denied.ok()) return denied

constexpr int kDefaultPage = 100;
constexpr int kMaxPage = 1000;

int PageSize(int requested) {
  return requested <= 0 ? kDefaultPage : std::min(requested, kMaxPage);
}

void FillCancel(const absl::StatusOr<sched::CancelResult>& result, v1::CancelResponse* response) {
  response->set_cancelled_pending(result->cancelled_pending);
  response->set_stopping_running(result->stopping_running);
}

}  // namespace

grpc::Status SweepService::SubmitSweep(grpc::ServerContext* context,
                                       const v1::SubmitSweepRequest* request,
                                       v1::SubmitSweepResponse* response) {
  SPHERET_AUTHORIZE(request->dry_run() ? Access::kRead : Access::kSubmit);
  absl::StatusOr<SubmitResult> result =
      coordinator_->Submit(request->spec_yaml(), request->idempotency_key(), request->dry_run());
  if (!result.ok()) return ToGrpcStatus(result.status());
  response->set_sweep_id(result->sweep_id);
  response->set_trial_count(result->trial_count);
  response->set_created_trials(result->created_trials);
  for (const TrialSpec& trial : result->trials) {
    response->add_trial_keys(trial.trial_key);
    if (request->dry_run()) response->add_configs_json(trial.config_json);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::GetSweep(grpc::ServerContext* context,
                                    const v1::GetSweepRequest* request, v1::Sweep* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  absl::StatusOr<SweepRecord> sweep = coordinator_->store().GetSweep(request->sweep_id());
  if (!sweep.ok()) return ToGrpcStatus(sweep.status());
  absl::StatusOr<std::map<std::string, int64_t>> counts =
      coordinator_->store().CountTrials(request->sweep_id());
  if (!counts.ok()) return ToGrpcStatus(counts.status());
  FillSweep(*sweep, *counts, response);
  return grpc::Status::OK;
}

grpc::Status SweepService::ListSweeps(grpc::ServerContext* context,
                                      const v1::ListSweepsRequest* request,
                                      v1::ListSweepsResponse* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  const int page = PageSize(request->page_size());
  absl::StatusOr<std::vector<SweepRecord>> sweeps =
      coordinator_->store().ListSweeps(request->page_token(), page);
  if (!sweeps.ok()) return ToGrpcStatus(sweeps.status());
  for (const SweepRecord& sweep : *sweeps) {
    absl::StatusOr<std::map<std::string, int64_t>> counts =
        coordinator_->store().CountTrials(sweep.sweep_id);
    if (!counts.ok()) return ToGrpcStatus(counts.status());
    FillSweep(sweep, *counts, response->add_sweeps());
  }
  if (static_cast<int>(sweeps->size()) == page)
    response->set_next_page_token(sweeps->back().sweep_id);
  return grpc::Status::OK;
}

grpc::Status SweepService::ListTrials(grpc::ServerContext* context,
                                      const v1::ListTrialsRequest* request,
                                      v1::ListTrialsResponse* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  store::TrialQuery query;
  query.sweep_id = request->sweep_id();
  query.after_trial_id = request->page_token();
  query.limit = PageSize(request->page_size());
  for (int state : request->states()) {
    std::optional<TrialState> parsed = FromProto(static_cast<v1::TrialState>(state));
    if (!parsed) return {grpc::StatusCode::INVALID_ARGUMENT, "states: TRIAL_STATE_UNSPECIFIED"};
    query.states.push_back(*parsed);
  }
  absl::StatusOr<std::vector<TrialRecord>> trials = coordinator_->store().ListTrials(query);
  if (!trials.ok()) return ToGrpcStatus(trials.status());
  for (const TrialRecord& trial : *trials) {
    absl::StatusOr<std::map<std::string, MetricSummary>> summaries =
        coordinator_->store().Summaries(trial.trial_id);
    if (!summaries.ok()) return ToGrpcStatus(summaries.status());
    FillTrial(trial, *summaries, response->add_trials());
  }
  if (static_cast<int>(trials->size()) == query.limit) {
    response->set_next_page_token(trials->back().trial_id);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::CancelSweep(grpc::ServerContext* context,
                                       const v1::CancelSweepRequest* request,
                                       v1::CancelResponse* response) {
  SPHERET_AUTHORIZE(Access::kSubmit);
  absl::StatusOr<sched::CancelResult> result = coordinator_->CancelSweep(request->sweep_id());
  if (!result.ok()) return ToGrpcStatus(result.status());
  FillCancel(result, response);
  return grpc::Status::OK;
}

grpc::Status SweepService::CancelTrial(grpc::ServerContext* context,
                                       const v1::CancelTrialRequest* request,
                                       v1::CancelResponse* response) {
  SPHERET_AUTHORIZE(Access::kSubmit);
  absl::StatusOr<sched::CancelResult> result = coordinator_->CancelTrial(request->trial_id());
  if (!result.ok()) return ToGrpcStatus(result.status());
  FillCancel(result, response);
  return grpc::Status::OK;
}

grpc::Status SweepService::WatchSweep(grpc::ServerContext* context,
                                      const v1::WatchSweepRequest* request,
                                      grpc::ServerWriter<v1::WatchSweepEvent>* writer) {
  SPHERET_AUTHORIZE(Access::kRead);
  store::Store& store = coordinator_->store();
  // What the client has seen of each trial: state, attempt and latest step of any metric.
  std::map<int64_t, std::tuple<TrialState, int, int64_t>> sent;
  int64_t version = -1;
  while (!context->IsCancelled()) {
    absl::StatusOr<SweepRecord> sweep = store.GetSweep(request->sweep_id());
    if (!sweep.ok()) return ToGrpcStatus(sweep.status());
    bool all_ended = true;
    store::TrialQuery query;
    query.sweep_id = request->sweep_id();
    query.limit = kMaxPage;
    for (;;) {
      absl::StatusOr<std::vector<TrialRecord>> trials = store.ListTrials(query);
      if (!trials.ok()) return ToGrpcStatus(trials.status());
      for (const TrialRecord& trial : *trials) {
        all_ended = all_ended && IsTerminal(trial.state);
        absl::StatusOr<std::map<std::string, MetricSummary>> summaries =
            store.Summaries(trial.trial_id);
        if (!summaries.ok()) return ToGrpcStatus(summaries.status());
        int64_t step = -1;
        for (const auto& [name, summary] : *summaries) step = std::max(step, summary.last_step);
        const auto seen = std::make_tuple(trial.state, trial.attempt, step);
        auto previous = sent.find(trial.trial_id);
        if (previous != sent.end() && previous->second == seen) continue;
        sent[trial.trial_id] = seen;
        v1::WatchSweepEvent event;
        FillTrial(trial, *summaries, event.mutable_trial());
        if (!writer->Write(event)) return grpc::Status::OK;  // the client went away
      }
      if (static_cast<int>(trials->size()) < query.limit) break;
      query.after_trial_id = trials->back().trial_id;
    }
    if (all_ended && sweep->state != SweepState::kActive) return grpc::Status::OK;
    version = coordinator_->WaitForChange(request->sweep_id(), version, 1000);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::QueryResults(grpc::ServerContext* context,
                                        const v1::QueryResultsRequest* request,
                                        v1::QueryResultsResponse* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  std::vector<std::string> metrics(request->metrics().begin(), request->metrics().end());
  if (metrics.empty()) metrics = {"train/loss_avg", "val/loss", "val/ppl"};
  store::TrialQuery query;
  query.sweep_id = request->sweep_id();
  query.limit = kMaxPage;
  for (;;) {
    absl::StatusOr<std::vector<TrialRecord>> trials = coordinator_->store().ListTrials(query);
    if (!trials.ok()) return ToGrpcStatus(trials.status());
    for (const TrialRecord& trial : *trials) {
      absl::StatusOr<std::map<std::string, MetricSummary>> summaries =
          coordinator_->store().Summaries(trial.trial_id);
      if (!summaries.ok()) return ToGrpcStatus(summaries.status());
      v1::ResultRow* row = response->add_rows();
      row->set_trial_id(trial.trial_id);
      row->set_state(ToProto(trial.state));
      row->set_config_json(trial.config_json);
      for (const std::string& name : metrics) {
        auto found = summaries->find(name);
        if (found == summaries->end()) continue;
        v1::MetricSummary& out = (*row->mutable_metrics())[name];
        out.set_last(found->second.last);
        out.set_min(found->second.min);
        out.set_max(found->second.max);
        out.set_count(found->second.count);
        out.set_last_step(found->second.last_step);
      }
    }
    if (static_cast<int>(trials->size()) < query.limit) break;
    query.after_trial_id = trials->back().trial_id;
  }
  return grpc::Status::OK;
}

}  // namespace spheret::rpc
