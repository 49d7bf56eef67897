// The worker's side of registration and leases: Register and Heartbeat (the attempts it runs and
// those whose Finish waits in the spool; the coordinator's stop orders), Acquire while slots are
// free, and the trainer processes each lease starts (worker/daemon/launch.h).
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_join.h"
#include "net/call_context.h"
#include "worker/daemon/batches.h"
#include "worker/daemon/launch.h"
#include "worker/daemon/worker.h"

namespace spheret::worker {
namespace {

constexpr int kRpcTimeoutMs = 2'000;  // Register, Heartbeat, Acquire: bounded; retried next tick

}  // namespace

grpc::ClientContext* Worker::Prepare(grpc::ClientContext* context, int timeout_ms) const {
  // Waits (within the deadline) for the connection instead of failing at once on the last error
  // while the channel is between reconnect attempts: a returning coordinator is reached at once.
  net::PrepareCall(context, {options_.token, absl::Milliseconds(timeout_ms),
                             /*wait_for_ready=*/true});
  return context;
}

void Worker::ListAttempts(google::protobuf::RepeatedPtrField<v1::AttemptId>* running,
                          google::protobuf::RepeatedPtrField<v1::AttemptId>* finished) {
  // Under mutex_, which Supervise holds while it moves an ended attempt into the spool: each
  // attempt is listed, as running or as finished.
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, attempt] : attempts_) {
    v1::AttemptId* id = running->Add();
    id->set_trial_id(key.first);
    id->set_attempt(key.second);
  }
  spool_->AddFinishes(finished);
}

void Worker::Register() {
  grpc::ClientContext context;
  v1::RegisterRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_host(options_.host);
  for (int gpu : options_.gpus) request.add_gpus(gpu);
  request.set_cpu_slots(options_.cpu_slots);
  request.set_version(options_.version);
  request.set_instance(instance_);
  ListAttempts(request.mutable_running(), request.mutable_finished());
  v1::RegisterResponse response;
  const grpc::Status status = stub_->Register(Prepare(&context, kRpcTimeoutMs), request, &response);
  if (!status.ok()) {
    rpc_errors_.Log("Register with " + options_.coordinator, status, clock_->NowMs());
    next_register_ms_ = clock_->NowMs() + 1'000;
    return;
  }
  registered_ = true;
  heartbeat_interval_ms_ = std::max(response.heartbeat_interval_ms(), 100);
  spdlog::info("registered as {} with {} ({} trial(s) reattached)", options_.worker_id,
               options_.coordinator, response.reattached_size());
}

void Worker::Heartbeat() {
  grpc::ClientContext context;
  v1::HeartbeatRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_instance(instance_);
  ListAttempts(request.mutable_running(), request.mutable_finished());
  v1::HeartbeatResponse response;
  const grpc::Status status =
      stub_->Heartbeat(Prepare(&context, kRpcTimeoutMs), request, &response);
  if (!status.ok()) {
    rpc_errors_.Log("Heartbeat", status, clock_->NowMs());
    return;
  }
  if (response.reregister()) registered_ = false;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const v1::AttemptId& stop : response.stop()) {
    auto found = attempts_.find({stop.trial_id(), stop.attempt()});
    if (found == attempts_.end() || found->second->stopping) continue;
    spdlog::info("trial {} attempt {}: the coordinator says stop", stop.trial_id(), stop.attempt());
    StopAttempt(*found->second, /*hand_back=*/false);
  }
}

int Worker::FreeSlots() const {
  const int total =
      options_.gpus.empty() ? options_.cpu_slots : static_cast<int>(options_.gpus.size());
  int busy = 0;
  for (const auto& [key, attempt] : attempts_) busy += attempt->lease.slots_size();
  return total - busy;
}

void Worker::AcquireWork() {
  int free = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free = FreeSlots();
  }
  if (free <= 0) return;
  if (spool_->full()) {  // the coordinator has been away long: take no new work until it drains
    spdlog::warn("the spool holds {} item(s), above its bound: taking no new trials",
                 spool_->depth());
    return;
  }
  const int port = FreeLocalPort();  // MASTER_PORT if this worker becomes rank 0 of a gang
  grpc::ClientContext context;
  v1::AcquireRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_free_slots(free);
  request.set_rendezvous_port(port);
  request.set_max_trials(free);
  request.set_instance(instance_);
  v1::AcquireResponse response;
  const grpc::Status status = stub_->Acquire(Prepare(&context, kRpcTimeoutMs), request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) registered_ = false;
  if (!status.ok()) {  // e.g. a reply over the receive limit: said, not silently retried
    rpc_errors_.Log("Acquire", status, clock_->NowMs());
    return;
  }
  for (const v1::Lease& lease : response.leases()) {
    if (absl::Status started = StartAttempt(lease); !started.ok()) {
      spdlog::error("trial {} attempt {}: {}", lease.trial_id(), lease.attempt(),
                    started.ToString());
      spool_->Push(FinishItem(options_.worker_id, lease.trial_id(), lease.attempt(),
                              v1::TRIAL_STATE_FAILED, -1, std::string(started.message())));
    }
  }
}

absl::Status Worker::StartAttempt(const v1::Lease& lease) {
  absl::StatusOr<RunFolder> folder =
      PrepareRunFolder(options_.work_dir, options_.checkpoint_root, lease);
  if (!folder.ok()) return folder.status();
  auto attempt = std::make_unique<Attempt>();
  attempt->lease = lease;
  attempt->ships_events = lease.rendezvous().node_rank() == 0;
  attempt->last_flush_ms = clock_->NowMs();
  Attempt* raw = attempt.get();
  const LaunchOptions launch{options_.lm_binary, options_.data_root, !options_.gpus.empty(),
                             options_.threads_per_slot};
  const int ranks = lease.has_eval() ? 1 : std::max(lease.rendezvous().ranks_per_node(), 1);
  // mutex_ is not held while processes start: if one fails, destroying `attempt` joins the
  // readers, whose callbacks take mutex_.
  for (int local = 0; local < ranks; ++local) {
    TrainerProcess::LineCallback on_line = [](const std::string&, size_t) {};
    if (local == 0 && attempt->ships_events) {
      on_line = [this, raw](const std::string& line, size_t line_bytes) {
        OnTrainerLine(raw, line, line_bytes);
      };
    }
    absl::StatusOr<std::unique_ptr<TrainerProcess>> process =
        TrainerProcess::Start(RankSpec(launch, lease, *folder, local), std::move(on_line));
    if (!process.ok()) return process.status();  // started ranks die with `attempt`
    attempt->ranks.push_back(std::move(*process));
  }
  spdlog::info("trial {} attempt {}: started {} rank(s) on slots [{}]{}", lease.trial_id(),
               lease.attempt(), ranks, absl::StrJoin(lease.slots(), ","),
               lease.has_eval() ? " (an evaluation job)"
                                : (folder->resume ? " (resuming from a checkpoint)" : ""));
  std::lock_guard<std::mutex> lock(mutex_);
  attempts_[{lease.trial_id(), lease.attempt()}] = std::move(attempt);
  return absl::OkStatus();
}

}  // namespace spheret::worker
