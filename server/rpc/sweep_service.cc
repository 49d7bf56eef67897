#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "protocol/metric_catalog.h"
#include "server/rpc/convert.h"
#include "server/rpc/services.h"

namespace spheret::rpc {
namespace {

#define SPHERET_AUTHORIZE(access) \
  if (grpc::Status denied = auth_->Check(context, access); !denied.ok()) return denied

constexpr int kDefaultPage = 100;
constexpr std::chrono::milliseconds kMinWatchPass{200};
constexpr int kMaxPage = 1000;

int PageSize(int requested) {
  return requested <= 0 ? kDefaultPage : std::min(requested, kMaxPage);
}

absl::Status ClientGone() { return absl::CancelledError("the client went away"); }

// Stops long work once the coordinator is stopping, the call is cancelled (the client went away,
// or the server is shutting down) or its deadline has passed, so none leaves a core busy or holds
// up a shutdown.
Interrupt CallInterrupt(grpc::ServerContext* context, const Coordinator* coordinator) {
  return [context, coordinator]() -> absl::Status {
    if (coordinator->StopRequested()) {
      return absl::UnavailableError("the coordinator is stopping; submit again when it is back");
    }
    if (context->IsCancelled()) {
      return absl::CancelledError("the call was cancelled (client gone or coordinator stopping)");
    }
    if (std::chrono::system_clock::now() > context->deadline()) {
      return absl::DeadlineExceededError("the call's deadline passed");
    }
    return absl::OkStatus();
  };
}

void FillCancel(const sched::CancelResult& result, v1::CancelResponse* response) {
  response->set_cancelled_pending(result.cancelled_pending);
  response->set_stopping_running(result.stopping_running);
}

}  // namespace

grpc::Status SweepService::SubmitSweep(grpc::ServerContext* context,
                                       const v1::SubmitSweepRequest* request,
                                       v1::SubmitSweepResponse* response) {
  SPHERET_AUTHORIZE(request->dry_run() ? Access::kRead : Access::kSubmit);
  const ConnectionFiles files(request->connection_files().begin(),
                              request->connection_files().end());
  absl::StatusOr<SubmitResult> result =
      coordinator_->Submit(request->spec_yaml(), request->idempotency_key(), request->dry_run(),
                           CallInterrupt(context, coordinator_), files);
  if (!result.ok()) return ToGrpcStatus(result.status());
  response->set_sweep_id(result->sweep_id);
  response->set_trial_count(result->trial_count);
  response->set_created_trials(result->created_trials);
  for (const std::string& notice : result->notices) response->add_notices(notice);
  for (const TrialSpec& trial : result->trials) {
    response->add_trial_keys(trial.trial_key);
    if (request->dry_run()) response->add_configs_json(trial.config_json);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::EvaluateSweep(grpc::ServerContext* context,
                                         const v1::EvaluateSweepRequest* request,
                                         v1::EvaluateSweepResponse* response) {
  SPHERET_AUTHORIZE(request->dry_run() ? Access::kRead : Access::kSubmit);
  EvalRequest eval;
  eval.sweep_id = request->sweep_id();
  eval.trial_ids.assign(request->trial_ids().begin(), request->trial_ids().end());
  for (const std::string& where : request->where()) {
    const size_t equals = where.find('=');
    if (equals == std::string::npos || equals == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "where '" + where.substr(0, 200) + "' is not knob=value");
    }
    eval.where.emplace_back(where.substr(0, equals), where.substr(equals + 1));
  }
  eval.tasks.assign(request->tasks().begin(), request->tasks().end());
  eval.data = request->data();
  eval.dry_run = request->dry_run();
  absl::StatusOr<std::vector<EvalPlan>> plans = coordinator_->Evaluate(eval);
  if (!plans.ok()) return ToGrpcStatus(plans.status());
  for (const EvalPlan& plan : *plans) {
    v1::EvalPlan* out = response->add_plans();
    out->set_trial_id(plan.trial_id);
    out->set_step(plan.step);
    for (const std::string& task : plan.tasks) out->add_tasks(task);
    out->set_job_id(plan.job_id);
    out->set_note(plan.note);
    if (plan.job_id > 0) response->set_created_jobs(response->created_jobs() + 1);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::GetSweep(grpc::ServerContext* context,
                                    const v1::GetSweepRequest* request, v1::Sweep* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  absl::StatusOr<SweepView> sweep = coordinator_->GetSweep(request->sweep_id());
  if (!sweep.ok()) return ToGrpcStatus(sweep.status());
  FillSweep(sweep->sweep, sweep->counts, response);
  if (request->include_spec()) response->set_spec_yaml(sweep->sweep.spec_yaml);
  return grpc::Status::OK;
}

grpc::Status SweepService::ListSweeps(grpc::ServerContext* context,
                                      const v1::ListSweepsRequest* request,
                                      v1::ListSweepsResponse* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  const int page = PageSize(request->page_size());
  absl::StatusOr<std::vector<SweepView>> sweeps =
      coordinator_->ListSweeps(request->page_token(), page);
  if (!sweeps.ok()) return ToGrpcStatus(sweeps.status());
  for (const SweepView& sweep : *sweeps)
    FillSweep(sweep.sweep, sweep.counts, response->add_sweeps());
  if (static_cast<int>(sweeps->size()) == page) {
    response->set_next_page_token(sweeps->back().sweep.sweep_id);
  }
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
  absl::StatusOr<std::vector<TrialView>> trials = coordinator_->ListTrials(query);
  if (!trials.ok()) return ToGrpcStatus(trials.status());
  for (const TrialView& trial : *trials) {
    FillTrial(trial.trial, trial.summaries, response->add_trials());
  }
  if (static_cast<int>(trials->size()) == query.limit) {
    response->set_next_page_token(trials->back().trial.trial_id);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::CancelSweep(grpc::ServerContext* context,
                                       const v1::CancelSweepRequest* request,
                                       v1::CancelResponse* response) {
  SPHERET_AUTHORIZE(Access::kSubmit);
  absl::StatusOr<sched::CancelResult> result = coordinator_->CancelSweep(request->sweep_id());
  if (!result.ok()) return ToGrpcStatus(result.status());
  FillCancel(*result, response);
  return grpc::Status::OK;
}

grpc::Status SweepService::CancelTrial(grpc::ServerContext* context,
                                       const v1::CancelTrialRequest* request,
                                       v1::CancelResponse* response) {
  SPHERET_AUTHORIZE(Access::kSubmit);
  absl::StatusOr<sched::CancelResult> result = coordinator_->CancelTrial(request->trial_id());
  if (!result.ok()) return ToGrpcStatus(result.status());
  FillCancel(*result, response);
  return grpc::Status::OK;
}

grpc::Status SweepService::ResumeTrial(grpc::ServerContext* context,
                                       const v1::ResumeTrialRequest* request, v1::Trial* response) {
  SPHERET_AUTHORIZE(Access::kSubmit);
  absl::StatusOr<TrialRecord> trial = coordinator_->Resume(request->trial_id());
  if (!trial.ok()) return ToGrpcStatus(trial.status());
  FillTrial(*trial, {}, response);
  return grpc::Status::OK;
}

grpc::Status SweepService::WatchSweep(grpc::ServerContext* context,
                                      const v1::WatchSweepRequest* request,
                                      grpc::ServerWriter<v1::WatchSweepEvent>* writer) {
  SPHERET_AUTHORIZE(Access::kRead);
  struct Slot {  // one of kMaxWatchers, held while the stream lasts
    std::atomic<int>& count;
    explicit Slot(std::atomic<int>& c) : count(c) { ++count; }
    ~Slot() { --count; }
  } slot(watchers_);
  if (slot.count.load() > kMaxWatchers) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("more than ", kMaxWatchers, " sweeps are being watched; try again later")};
  }
  std::unique_ptr<SweepWatch> watch = coordinator_->Watch(request->sweep_id());
  int64_t version = -1;
  while (!context->IsCancelled()) {
    const auto pass_start = std::chrono::steady_clock::now();
    // Once a pass (at least every ~1.2 s): a token revoked or expired since the call began ends
    // the stream.
    SPHERET_AUTHORIZE(Access::kRead);
    absl::StatusOr<WatchPass> pass = watch->Next();
    if (!pass.ok()) return ToGrpcStatus(pass.status());
    for (const TrialView& trial : pass->changed) {
      v1::WatchSweepEvent event;
      FillTrial(trial.trial, trial.summaries, event.mutable_trial());
      if (!writer->Write(event)) return grpc::Status::OK;  // the client went away
    }
    if (pass->finished) return grpc::Status::OK;
    // At most a few passes a second however fast metrics arrive: each pass reads every live
    // trial's summaries.
    std::this_thread::sleep_until(pass_start + kMinWatchPass);
    version = coordinator_->WaitForChange(request->sweep_id(), version, 1000);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::QueryResults(grpc::ServerContext* context,
                                        const v1::QueryResultsRequest* request,
                                        v1::QueryResultsResponse* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  std::vector<std::string> metrics(request->metrics().begin(), request->metrics().end());
  if (metrics.empty()) metrics = {protocol::kTrainLossAvg, protocol::kValLoss, protocol::kValPpl};
  store::TrialQuery query;
  query.sweep_id = request->sweep_id();
  query.after_trial_id = request->page_token();
  query.limit = PageSize(request->page_size());
  absl::StatusOr<std::vector<TrialResult>> results = coordinator_->ListResults(query);
  if (!results.ok()) return ToGrpcStatus(results.status());
  for (const TrialResult& result : *results) {
    FillResultRow(result.trial.trial, result.trial.summaries, result.evals, metrics,
                  response->add_rows());
  }
  if (static_cast<int>(results->size()) == query.limit) {
    response->set_next_page_token(results->back().trial.trial.trial_id);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::GetTrialLogs(grpc::ServerContext* context,
                                        const v1::GetTrialLogsRequest* request,
                                        v1::TrialLogs* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  EventPageQuery page;
  page.limit = request->max_events() <= 0 ? 200 : std::min(request->max_events(), kMaxLogEvents);
  if (request->has_page_token()) {
    page.before.emplace(request->page_token().attempt(), request->page_token().seq());
  }
  absl::StatusOr<TrialLogs> logs = coordinator_->GetTrialLogs(request->trial_id());
  if (!logs.ok()) return ToGrpcStatus(logs.status());
  FillTrial(logs->trial.trial, logs->trial.summaries, response->mutable_trial());
  for (const AttemptRecord& attempt : logs->attempts)
    FillAttempt(attempt, response->add_attempts());
  // The events get what the trial and its attempts leave of the reply.
  const size_t head_bytes = response->ByteSizeLong();
  page.max_bytes = head_bytes < kMaxLogsReplyBytes ? kMaxLogsReplyBytes - head_bytes : 0;
  absl::StatusOr<EventPage> events = coordinator_->TrialEvents(request->trial_id(), page);
  if (!events.ok()) return ToGrpcStatus(events.status());
  for (const EventRecord& event : events->events) {
    v1::StoredEvent* out = response->add_events();
    out->set_attempt(event.attempt);
    out->set_seq(event.seq);
    out->set_json(event.json);
  }
  if (events->more) {
    response->mutable_next_page_token()->set_attempt(events->events.front().attempt);
    response->mutable_next_page_token()->set_seq(events->events.front().seq);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::StreamCurves(grpc::ServerContext* context,
                                        const v1::StreamCurvesRequest* request,
                                        grpc::ServerWriter<v1::Curve>* writer) {
  SPHERET_AUTHORIZE(Access::kRead);
  const std::string metric = request->metric().empty() ? protocol::kValLoss : request->metric();
  return ToGrpcStatus(coordinator_->ForEachCurve(
      request->sweep_id(), metric, request->max_points(),
      [&](const TrialRecord& trial, const CurveRecord& curve, int64_t points) {
        if (context->IsCancelled()) return ClientGone();
        v1::Curve out;
        out.set_trial_id(trial.trial_id);
        out.set_config_json(trial.config_json);
        out.set_state(ToProto(trial.state));
        out.set_role(trial.role);
        out.set_rung(trial.rung);
        out.mutable_steps()->Add(curve.steps.begin(), curve.steps.end());
        out.mutable_values()->Add(curve.values.begin(), curve.values.end());
        out.set_points(points);
        return writer->Write(out) ? absl::OkStatus() : ClientGone();
      }));
}

grpc::Status SweepService::StreamLayerValues(grpc::ServerContext* context,
                                             const v1::StreamLayerValuesRequest* request,
                                             grpc::ServerWriter<v1::LayerValues>* writer) {
  SPHERET_AUTHORIZE(Access::kRead);
  const LayerValueQuery query = FromProto(*request);
  return ToGrpcStatus(coordinator_->ForEachLayerSeries(
      request->sweep_id(), query,
      [&](const TrialRecord& trial, const std::vector<LayerSeries>& series) {
        if (context->IsCancelled()) return ClientGone();
        v1::LayerValues out;
        out.set_trial_id(trial.trial_id);
        out.set_config_json(trial.config_json);
        out.set_state(ToProto(trial.state));
        for (const LayerSeries& one : series) FillLayerSeries(one, out.add_series());
        return writer->Write(out) ? absl::OkStatus() : ClientGone();
      }));
}

}  // namespace spheret::rpc
