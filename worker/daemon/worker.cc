#include "worker/daemon/worker.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/printable.h"
#include "net/call_context.h"
#include "protocol/trainer_events.h"
#include "worker/daemon/batches.h"
#include "worker/daemon/launch.h"

namespace spheret::worker {
namespace {

using protocol::kExitDiverged;
using protocol::kExitStopped;
constexpr int kRpcTimeoutMs = 2'000;  // Register, Heartbeat, Acquire: bounded; retried next tick
static_assert(kMaxStdoutLineBytes == protocol::kMaxEventLineBytes);
constexpr int kMaxRejectionsLogged = 10;  // per attempt; the metric counts them all

// 16 random hex digits naming this daemon's run (two daemons with one worker id are told apart).
std::string RandomInstance() {
  std::random_device device;
  return absl::StrCat(absl::Hex(device(), absl::kZeroPad8), absl::Hex(device(), absl::kZeroPad8));
}

}  // namespace

// One leased trial attempt on this worker: its trainer processes and the events not yet sent.
struct Worker::Attempt {
  v1::Lease lease;
  std::vector<std::unique_ptr<TrainerProcess>> ranks;
  bool ships_events = false;  // holds global rank 0, whose stdout carries the events
  v1::EventBatch pending;     // events gathered since the last flush (guarded by mutex_)
  int64_t next_seq = 0;       // stdout line number
  int lines_rejected = 0;     // stdout lines that were not valid events
  size_t pending_bytes = 0;   // about the serialized size of `pending`
  int64_t last_flush_ms = 0;
  bool stopping = false;   // SIGTERM sent
  bool hand_back = false;  // stopped because the worker shuts down
  bool stale = false;      // the coordinator no longer knows this attempt: report nothing
  int64_t kill_at_ms = 0;  // SIGKILL after the grace period
};

Worker::Worker(WorkerOptions options, WorkerMetrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      clock_(options_.clock != nullptr ? options_.clock : &real_clock_),
      instance_(RandomInstance()) {
  // Reconnect quickly when the coordinator comes back: leases wait only one TTL after its restart.
  grpc::ChannelArguments args;
  // (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS stays at its default: gRPC uses it as the connect timeout,
  // and a short one abandons handshakes on a loaded machine.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1'000);
  channel_ = grpc::CreateCustomChannel(
      options_.coordinator,
      options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = v1::WorkerService::NewStub(channel_);
  SpoolOptions spool;
  spool.spool_path = options_.work_dir + "/spool.bin";
  spool.token = options_.token;
  spool_ = std::make_unique<Spool>(
      channel_, spool,
      [this](const SpoolItem& item, const grpc::Status& status) { Rejected(item, status); });
}

Worker::~Worker() = default;

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

void Worker::OnTrainerLine(Attempt* attempt, const std::string& line, size_t line_bytes) {
  protocol::TrainerEvent event;
  const absl::Status refused = line_bytes > line.size() ? protocol::LineTooLong(line_bytes)
                                                        : protocol::ParseTrainerEvent(line, &event);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!refused.ok()) {  // logged and dropped (an over-long one leaves an error event); lines flow
    metrics_->AddLinesRejected(1);
    if (attempt->lines_rejected++ < kMaxRejectionsLogged) {
      spdlog::warn("trial {} attempt {}: trainer line refused ({}): {}", attempt->lease.trial_id(),
                   attempt->lease.attempt(), PrintableText(std::string(refused.message())),
                   PrintableText(protocol::Excerpt(line, 200)));
    }
    if (line_bytes <= protocol::kMaxEventLineBytes) return;
  }
  const int64_t seq = attempt->next_seq++;
  // A batch carries one checkpoint: send the one gathered so far before recording another.
  if (std::holds_alternative<protocol::CheckpointEvent>(event) &&
      attempt->pending.checkpoint_step() > 0) {
    FlushEvents(*attempt, /*force=*/true);
  }
  attempt->pending_bytes += refused.ok()
                                ? AddToBatch(event, line, seq, clock_->NowMs(), &attempt->pending)
                                : AddOverlongLine(line, line_bytes, seq, &attempt->pending);
  if (BatchItems(attempt->pending) >= kMaxBatchItems || attempt->pending_bytes >= kMaxBatchBytes) {
    FlushEvents(*attempt, /*force=*/true);
  }
}

void Worker::FlushEvents(Attempt& attempt, bool force) {
  v1::EventBatch& batch = attempt.pending;
  const int count = BatchItems(batch);
  if (count == 0) return;
  if (!force && clock_->NowMs() - attempt.last_flush_ms < options_.batch_interval_ms) return;
  attempt.last_flush_ms = clock_->NowMs();
  if (attempt.stale) {  // the coordinator refuses this attempt's writes
    batch.Clear();
    attempt.pending_bytes = 0;
    return;
  }
  SpoolItem item;
  item.batch = std::move(batch);
  item.batch.set_trial_id(attempt.lease.trial_id());
  item.batch.set_attempt(attempt.lease.attempt());
  batch = v1::EventBatch();
  attempt.pending_bytes = 0;
  spool_->Push(std::move(item));
  metrics_->AddEventsForwarded(count);
}

void Worker::StopAttempt(Attempt& attempt, bool hand_back) {
  attempt.stopping = true;
  attempt.hand_back = hand_back;
  attempt.kill_at_ms = clock_->NowMs() + options_.grace_ms;
  for (auto& rank : attempt.ranks) rank->Signal(SIGTERM);
}

void Worker::Supervise() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    Attempt& attempt = *it->second;
    FlushEvents(attempt, /*force=*/false);
    if (attempt.stopping && clock_->NowMs() >= attempt.kill_at_ms) {
      for (auto& rank : attempt.ranks) rank->Signal(SIGKILL);
    }
    bool all_exited = true, one_failed = false;
    for (auto& rank : attempt.ranks) {
      const bool exited = rank->Exited();
      all_exited = all_exited && exited;
      one_failed = one_failed || (exited && rank->exit_code() != 0);
    }
    if (one_failed && !all_exited && !attempt.stopping) {
      spdlog::warn("trial {}: a rank died; stopping the gang", attempt.lease.trial_id());
      StopAttempt(attempt, /*hand_back=*/false);
    }
    if (!all_exited) {
      ++it;
      continue;
    }
    FinishAttempt(attempt);
    it = attempts_.erase(it);
    next_acquire_ms_ = 0;  // a slot is free: ask for work at the next tick, not an interval later
  }
}

void Worker::FinishAttempt(Attempt& attempt) {
  FlushEvents(attempt, /*force=*/true);
  const TrainerProcess* worst = attempt.ranks.front().get();
  for (const auto& rank : attempt.ranks) {
    if (rank->exit_code() != 0 && (worst->exit_code() == 0 || worst->exit_code() == kExitStopped)) {
      worst = rank.get();
    }
  }
  const int code = worst->exit_code();
  v1::TrialState outcome = v1::TRIAL_STATE_FAILED;
  if (code == 0) outcome = v1::TRIAL_STATE_SUCCEEDED;
  if (code == kExitDiverged) outcome = v1::TRIAL_STATE_DIVERGED;
  if (attempt.stopping && (code == kExitStopped || worst->killed_by_signal())) {
    outcome = attempt.hand_back ? v1::TRIAL_STATE_PENDING : v1::TRIAL_STATE_CANCELLED;
  }
  spdlog::info("trial {} attempt {}: trainer exited {} -> {}", attempt.lease.trial_id(),
               attempt.lease.attempt(), code, v1::TrialState_Name(outcome));
  // A stale attempt reports nothing; a gang member leaves a success to rank 0's worker.
  if (attempt.stale || (!attempt.ships_events && outcome == v1::TRIAL_STATE_SUCCEEDED)) return;
  spool_->Push(FinishItem(options_.worker_id, attempt.lease.trial_id(), attempt.lease.attempt(),
                          outcome, code,
                          outcome == v1::TRIAL_STATE_FAILED ? worst->StderrTail() : ""));
}

void Worker::Rejected(const SpoolItem& item, const grpc::Status& status) {
  spdlog::warn("trial {} attempt {}: the coordinator refused a {}: {}", item.trial_id(),
               item.attempt(), item.is_finish ? "finish" : "batch", status.error_message());
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = attempts_.find({item.trial_id(), item.attempt()});
  if (found == attempts_.end()) return;
  found->second->stale = true;  // lease lost: drop the trial
  if (!found->second->stopping) StopAttempt(*found->second, /*hand_back=*/false);
}

void Worker::UpdateMetrics() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int total =
      options_.gpus.empty() ? options_.cpu_slots : static_cast<int>(options_.gpus.size());
  const int free = FreeSlots();
  int processes = 0;
  for (const auto& [key, attempt] : attempts_) processes += attempt->ranks.size();
  metrics_->SetSlots(total - free, free);
  metrics_->SetTrainerProcesses(processes);
  metrics_->SetSpoolDepth(static_cast<int64_t>(spool_->depth()));
}

absl::Status Worker::Run(const std::atomic<bool>& stop) {
  if (absl::Status started = spool_->Start(); !started.ok()) return started;
  auto tick = [this](bool acquire) {
    const int64_t now = clock_->NowMs();
    if (!registered_ && now >= next_register_ms_) Register();
    if (registered_ && now >= next_heartbeat_ms_) {
      Heartbeat();
      next_heartbeat_ms_ = now + heartbeat_interval_ms_;
    }
    if (acquire && registered_ && now >= next_acquire_ms_) {
      AcquireWork();
      next_acquire_ms_ = now + options_.acquire_interval_ms;
    }
    Supervise();
    UpdateMetrics();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  while (!stop) tick(/*acquire=*/true);
  spdlog::info("shutting down: stopping trainers and handing their trials back");
  shutting_down_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, attempt] : attempts_) {
      if (!attempt->stopping) StopAttempt(*attempt, /*hand_back=*/true);
    }
  }
  const int64_t deadline = clock_->NowMs() + options_.grace_ms + 5'000;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (attempts_.empty() || clock_->NowMs() > deadline) break;
    }
    tick(/*acquire=*/false);
  }
  if (!spool_->Flush(options_.grace_ms)) {
    spdlog::warn("{} item(s) still in the spool; they are sent when the worker starts again",
                 spool_->depth());
  }
  return absl::OkStatus();
}

}  // namespace spheret::worker
