#include <chrono>

#include "absl/strings/str_cat.h"
#include "server/rpc/convert.h"
#include "server/rpc/services.h"

namespace spheret::rpc {
namespace {

// Checks the token, and that a worker token speaks for `worker_id`; declares `caller`.
#define SPHERET_AUTHORIZE_WORKER(worker_id)                                                  \
  TokenIdentity caller;                                                                      \
  if (grpc::Status denied = auth_->Check(context, Access::kWorker, &caller); !denied.ok()) { \
    return denied;                                                                           \
  }                                                                                          \
  if (absl::Status denied = CheckWorkerId(caller, worker_id); !denied.ok())                  \
  return ToGrpcStatus(denied)

template <typename Repeated>
std::vector<sched::AttemptId> Running(const Repeated& running) {
  std::vector<sched::AttemptId> trials;
  for (const v1::AttemptId& trial : running) trials.emplace_back(trial.trial_id(), trial.attempt());
  return trials;
}

// Whether the caller of `context` has given up: cancelled (gone, or the server stopping) or past
// its deadline.
Interrupt CallEnded(grpc::ServerContext* context) {
  return [context]() -> absl::Status {
    if (context->IsCancelled()) return absl::CancelledError("the call was cancelled");
    if (std::chrono::system_clock::now() > context->deadline()) {
      return absl::DeadlineExceededError("the call's deadline passed");
    }
    return absl::OkStatus();
  };
}

v1::Lease LeaseToProto(const Lease& grant) {
  v1::Lease lease;
  lease.set_trial_id(grant.record.trial_id);
  lease.set_attempt(grant.record.attempt);
  lease.set_config_json(grant.config_json);
  lease.set_sweep_id(grant.sweep_id);
  lease.set_expires_ms(grant.record.expires_ms);
  for (int slot : grant.record.slots) lease.add_slots(slot);
  v1::Rendezvous* rendezvous = lease.mutable_rendezvous();
  rendezvous->set_master_addr(grant.record.rendezvous.master_addr);
  rendezvous->set_master_port(grant.record.rendezvous.master_port);
  rendezvous->set_nodes(grant.record.rendezvous.nodes);
  rendezvous->set_slots_per_node(grant.record.rendezvous.slots_per_node);
  rendezvous->set_ranks_per_node(grant.record.rendezvous.ranks_per_node);
  rendezvous->set_world_size(grant.record.rendezvous.nodes *
                             grant.record.rendezvous.ranks_per_node);
  rendezvous->set_node_rank(grant.record.node_rank);
  if (grant.eval.trial_id > 0) {
    v1::EvalWork* eval = lease.mutable_eval();
    eval->set_trial_id(grant.eval.trial_id);
    eval->set_step(grant.eval.step);
    for (const std::string& task : grant.eval.tasks) eval->add_tasks(task);
    eval->set_data(grant.eval.data);
  }
  return lease;
}

}  // namespace

grpc::Status WorkerService::Register(grpc::ServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) {
  SPHERET_AUTHORIZE_WORKER(request->worker_id());
  WorkerRecord worker;
  worker.worker_id = request->worker_id();
  worker.host = request->host().empty() ? "127.0.0.1" : request->host();
  worker.gpus.assign(request->gpus().begin(), request->gpus().end());
  worker.gpu_names.assign(request->gpu_names().begin(), request->gpu_names().end());
  worker.cpu_slots = request->cpu_slots();
  worker.version = request->version();
  worker.instance = request->instance();
  absl::StatusOr<std::vector<sched::AttemptId>> reattached =
      coordinator_->Register(worker, Running(request->running()), Running(request->finished()));
  if (!reattached.ok()) return ToGrpcStatus(reattached.status());
  response->set_lease_ttl_ms(static_cast<int32_t>(coordinator_->options().scheduler.lease_ttl_ms));
  response->set_heartbeat_interval_ms(
      static_cast<int32_t>(coordinator_->options().heartbeat_interval_ms));
  for (const auto& [trial_id, attempt] : *reattached) {
    v1::AttemptId* trial = response->add_reattached();
    trial->set_trial_id(trial_id);
    trial->set_attempt(attempt);
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::Heartbeat(grpc::ServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) {
  SPHERET_AUTHORIZE_WORKER(request->worker_id());
  absl::StatusOr<sched::HeartbeatResult> result =
      coordinator_->Heartbeat(request->worker_id(), request->instance(),
                              Running(request->running()), Running(request->finished()));
  if (!result.ok()) return ToGrpcStatus(result.status());
  response->set_reregister(!result->known);
  for (const auto& [trial_id, attempt] : result->stop) {
    v1::AttemptId* trial = response->add_stop();
    trial->set_trial_id(trial_id);
    trial->set_attempt(attempt);
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::Acquire(grpc::ServerContext* context, const v1::AcquireRequest* request,
                                    v1::AcquireResponse* response) {
  SPHERET_AUTHORIZE_WORKER(request->worker_id());
  absl::StatusOr<std::vector<Lease>> grants = coordinator_->Acquire(
      request->worker_id(), request->instance(), request->free_slots(), request->rendezvous_port(),
      std::max(request->max_trials(), 1), CallEnded(context));
  if (!grants.ok()) return ToGrpcStatus(grants.status());
  size_t bytes = 0;
  for (const Lease& grant : *grants) {
    v1::Lease lease = LeaseToProto(grant);
    const size_t lease_bytes = lease.ByteSizeLong() + 8;  // with its tag and length
    if (bytes + lease_bytes <= max_reply_bytes_) {
      bytes += lease_bytes;
      *response->add_leases() = std::move(lease);
      continue;
    }
    // A reply the worker cannot receive never arrives: this lease does not go out. It is handed
    // back (granted again on a later Acquire) or, when it fits in no reply, its attempt fails.
    AttemptEnd end;
    end.trial_id = grant.record.trial_id;
    end.attempt = grant.record.attempt;
    end.exit_code = -1;
    end.outcome = lease_bytes <= max_reply_bytes_ ? TrialState::kPending : TrialState::kFailed;
    if (end.outcome == TrialState::kFailed) {
      end.stderr_tail = absl::StrCat("the trial's lease is ", lease_bytes, " bytes (its config ",
                                     grant.config_json.size(), " bytes), over the limit of a ",
                                     "reply to a worker (", max_reply_bytes_,
                                     " bytes): shorten the sweep's strings");
    }
    if (absl::StatusOr<TrialState> ended = coordinator_->Finish(end, request->worker_id());
        !ended.ok()) {
      return ToGrpcStatus(ended.status());  // the lease expires in its TTL
    }
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::IngestEvents(grpc::ServerContext* context,
                                         grpc::ServerReader<v1::EventBatch>* reader,
                                         v1::IngestEventsResponse* response) {
  SPHERET_AUTHORIZE_WORKER(caller.worker_id);  // batches name no worker: the lease says
  v1::EventBatch batch;
  int64_t rows = 0, batches = 0;
  while (reader->Read(&batch)) {
    // A worker token may write only into attempts whose lease its worker holds.
    absl::StatusOr<int64_t> inserted = coordinator_->Ingest(FromProto(batch), caller.worker_id);
    if (!inserted.ok()) return ToGrpcStatus(inserted.status());
    rows += *inserted;
    ++batches;
  }
  response->set_metric_rows(rows);
  response->set_batches(batches);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Finish(grpc::ServerContext* context, const v1::FinishRequest* request,
                                   v1::FinishResponse* response) {
  SPHERET_AUTHORIZE_WORKER(request->worker_id());
  std::optional<TrialState> outcome = FromProto(request->outcome());
  if (!outcome) return {grpc::StatusCode::INVALID_ARGUMENT, "outcome is TRIAL_STATE_UNSPECIFIED"};
  AttemptEnd end;
  end.trial_id = request->trial_id();
  end.attempt = request->attempt();
  end.outcome = *outcome;
  end.exit_code = request->exit_code();
  end.stderr_tail = request->stderr_tail();
  absl::StatusOr<TrialState> state = coordinator_->Finish(end, request->worker_id());
  if (!state.ok()) return ToGrpcStatus(state.status());
  response->set_state(ToProto(*state));
  return grpc::Status::OK;
}

}  // namespace spheret::rpc
