#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status_macros.h"
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

// Calls `visit` on every trial of a sweep in id order, a page at a time, and returns the first
// error it returns (visitors return CancelledError when their client went away).
absl::Status ForEachTrial(store::Store& store, int64_t sweep_id,
                          const std::function<absl::Status(const TrialRecord&)>& visit) {
  store::TrialQuery query;
  query.sweep_id = sweep_id;
  query.limit = kMaxPage;
  for (;;) {
    absl::StatusOr<std::vector<TrialRecord>> trials = store.ListTrials(query);
    if (!trials.ok()) return trials.status();
    for (const TrialRecord& trial : *trials) {
      if (absl::Status status = visit(trial); !status.ok()) return status;
    }
    if (static_cast<int>(trials->size()) < query.limit) return absl::OkStatus();
    query.after_trial_id = trials->back().trial_id;
  }
}

absl::Status ClientGone() { return absl::CancelledError("the client went away"); }

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
  struct Slot {  // one of kMaxWatchers, held while the stream lasts
    std::atomic<int>& count;
    explicit Slot(std::atomic<int>& c) : count(c) { ++count; }
    ~Slot() { --count; }
  } slot(watchers_);
  if (slot.count.load() > kMaxWatchers) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("more than ", kMaxWatchers, " sweeps are being watched; try again later")};
  }
  store::Store& store = coordinator_->store();
  // What the client has seen of each trial: state, attempt and latest step of any metric.
  std::map<int64_t, std::tuple<TrialState, int, int64_t>> sent;
  int64_t version = -1;
  while (!context->IsCancelled()) {
    const auto pass_start = std::chrono::steady_clock::now();
    absl::StatusOr<SweepRecord> sweep = store.GetSweep(request->sweep_id());
    if (!sweep.ok()) return ToGrpcStatus(sweep.status());
    bool all_ended = true;
    absl::Status pass = ForEachTrial(store, request->sweep_id(), [&](const TrialRecord& trial) {
      all_ended = all_ended && IsTerminal(trial.state);
      auto previous = sent.find(trial.trial_id);
      if (previous != sent.end() && IsTerminal(trial.state) &&
          std::get<0>(previous->second) == trial.state &&
          std::get<1>(previous->second) == trial.attempt) {
        return absl::OkStatus();  // sent as ended: nothing about it changes any more
      }
      SPHERET_ASSIGN_OR_RETURN(auto summaries, store.Summaries(trial.trial_id));
      int64_t step = -1;
      for (const auto& [name, summary] : summaries) step = std::max(step, summary.last_step);
      const auto seen = std::make_tuple(trial.state, trial.attempt, step);
      if (previous != sent.end() && previous->second == seen) return absl::OkStatus();
      sent[trial.trial_id] = seen;
      v1::WatchSweepEvent event;
      FillTrial(trial, summaries, event.mutable_trial());
      return writer->Write(event) ? absl::OkStatus() : ClientGone();
    });
    if (absl::IsCancelled(pass)) return grpc::Status::OK;
    if (!pass.ok()) return ToGrpcStatus(pass);
    if (all_ended && sweep->state != SweepState::kActive) return grpc::Status::OK;
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
  if (request->sweep_id() <= 0) {  // 0 would walk every trial of the database
    return {grpc::StatusCode::INVALID_ARGUMENT, "sweep_id is required (> 0)"};
  }
  std::vector<std::string> metrics(request->metrics().begin(), request->metrics().end());
  if (metrics.empty()) metrics = {"train/loss_avg", "val/loss", "val/ppl"};
  store::Store& store = coordinator_->store();
  return ToGrpcStatus(ForEachTrial(store, request->sweep_id(), [&](const TrialRecord& trial) {
    SPHERET_ASSIGN_OR_RETURN(auto summaries, store.Summaries(trial.trial_id));
    SPHERET_ASSIGN_OR_RETURN(std::vector<EvalRecord> evals, store.Evals(trial.trial_id));
    v1::ResultRow* row = response->add_rows();
    row->set_trial_id(trial.trial_id);
    row->set_state(ToProto(trial.state));
    row->set_config_json(trial.config_json);
    for (const std::string& name : metrics) {
      auto found = summaries.find(name);
      if (found == summaries.end()) continue;
      v1::MetricSummary& out = (*row->mutable_metrics())[name];
      out.set_last(found->second.last);
      out.set_min(found->second.min);
      out.set_max(found->second.max);
      out.set_count(found->second.count);
      out.set_last_step(found->second.last_step);
    }
    for (const EvalRecord& eval : evals) {
      v1::EvalScore* score = row->add_evals();
      score->set_task(eval.task);
      score->set_metric(eval.metric);
      score->set_value(eval.value);
      score->set_std_error(eval.stderr_value);
      score->set_step(eval.step);
    }
    return absl::OkStatus();
  }));
}

grpc::Status SweepService::GetTrialLogs(grpc::ServerContext* context,
                                        const v1::GetTrialLogsRequest* request,
                                        v1::TrialLogs* response) {
  SPHERET_AUTHORIZE(Access::kRead);
  store::Store& store = coordinator_->store();
  absl::StatusOr<std::optional<TrialRecord>> trial = store.GetTrial(request->trial_id());
  if (!trial.ok()) return ToGrpcStatus(trial.status());
  if (!trial->has_value()) {
    return {grpc::StatusCode::NOT_FOUND, absl::StrCat("no trial ", request->trial_id())};
  }
  absl::StatusOr<std::map<std::string, MetricSummary>> summaries =
      store.Summaries(request->trial_id());
  if (!summaries.ok()) return ToGrpcStatus(summaries.status());
  FillTrial(**trial, *summaries, response->mutable_trial());
  absl::StatusOr<std::vector<AttemptRecord>> attempts = store.Attempts(request->trial_id());
  if (!attempts.ok()) return ToGrpcStatus(attempts.status());
  for (const AttemptRecord& attempt : *attempts) {
    v1::AttemptInfo* info = response->add_attempts();
    info->set_attempt(attempt.attempt);
    info->set_worker_id(attempt.worker_id);
    info->set_started_ms(attempt.started_ms);
    info->set_ended_ms(attempt.ended_ms);
    info->set_outcome(attempt.outcome);
    info->set_exit_code(attempt.exit_code);
    info->set_stderr_tail(attempt.stderr_tail);
  }
  const int limit = request->max_events() <= 0 ? 200 : std::min(request->max_events(), 10000);
  absl::StatusOr<std::vector<EventRecord>> events = store.Events(request->trial_id(), limit);
  if (!events.ok()) return ToGrpcStatus(events.status());
  for (const EventRecord& event : *events) {
    v1::StoredEvent* out = response->add_events();
    out->set_attempt(event.attempt);
    out->set_seq(event.seq);
    out->set_json(event.json);
  }
  return grpc::Status::OK;
}

grpc::Status SweepService::StreamCurves(grpc::ServerContext* context,
                                        const v1::StreamCurvesRequest* request,
                                        grpc::ServerWriter<v1::Curve>* writer) {
  SPHERET_AUTHORIZE(Access::kRead);
  store::Store& store = coordinator_->store();
  if (absl::StatusOr<SweepRecord> sweep = store.GetSweep(request->sweep_id()); !sweep.ok()) {
    return ToGrpcStatus(sweep.status());
  }
  const std::string metric = request->metric().empty() ? "val/loss" : request->metric();
  // A page of trials at a time, one curve in memory at a time.
  return ToGrpcStatus(ForEachTrial(store, request->sweep_id(), [&](const TrialRecord& trial) {
    if (context->IsCancelled()) return ClientGone();
    SPHERET_ASSIGN_OR_RETURN(CurveRecord curve, store.Curve(trial.trial_id, metric));
    if (curve.steps.empty()) return absl::OkStatus();
    v1::Curve out;
    out.set_trial_id(trial.trial_id);
    out.set_config_json(trial.config_json);
    out.set_state(ToProto(trial.state));
    out.mutable_steps()->Add(curve.steps.begin(), curve.steps.end());
    out.mutable_values()->Add(curve.values.begin(), curve.values.end());
    return writer->Write(out) ? absl::OkStatus() : ClientGone();
  }));
}

grpc::Status TokenService::CreateToken(grpc::ServerContext* context,
                                       const v1::CreateTokenRequest* request,
                                       v1::CreateTokenResponse* response) {
  SPHERET_AUTHORIZE(Access::kAdmin);
  const std::string& role = request->role();
  if (role != "admin" && role != "submit" && role != "worker" && role != "read") {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "role must be admin, submit, worker or read, got '" + role + "'"};
  }
  const std::string name = request->name().empty() ? role : request->name();
  const std::string token = "sph_" + RandomHex(24);
  absl::Status stored = coordinator_->store().CreateToken(
      Sha256Hex(token), name, role, request->worker_id(), coordinator_->clock().NowMs());
  if (!stored.ok()) return ToGrpcStatus(stored);
  response->set_token(token);
  response->set_name(name);
  response->set_role(role);
  response->set_worker_id(request->worker_id());
  return grpc::Status::OK;
}

grpc::Status TokenService::ListTokens(grpc::ServerContext* context, const v1::ListTokensRequest*,
                                      v1::ListTokensResponse* response) {
  SPHERET_AUTHORIZE(Access::kAdmin);
  absl::StatusOr<std::vector<TokenRecord>> tokens = coordinator_->store().ListTokens();
  if (!tokens.ok()) return ToGrpcStatus(tokens.status());
  for (const TokenRecord& token : *tokens) {
    v1::TokenInfo* info = response->add_tokens();
    info->set_name(token.name);
    info->set_role(token.role);
    info->set_hash_prefix(token.hash_prefix);
    info->set_created_ms(token.created_ms);
    info->set_worker_id(token.worker_id);
  }
  return grpc::Status::OK;
}

grpc::Status TokenService::RevokeToken(grpc::ServerContext* context,
                                       const v1::RevokeTokenRequest* request,
                                       v1::RevokeTokenResponse* response) {
  SPHERET_AUTHORIZE(Access::kAdmin);
  absl::StatusOr<int64_t> revoked = coordinator_->store().RevokeToken(request->name());
  if (!revoked.ok()) return ToGrpcStatus(revoked.status());
  auth_->Forget();
  if (*revoked == 0) {
    return {grpc::StatusCode::NOT_FOUND, "no token named '" + request->name() + "'"};
  }
  response->set_revoked(*revoked);
  return grpc::Status::OK;
}

}  // namespace spheret::rpc
