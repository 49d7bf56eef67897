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
#include "base/printable.h"
#include "protocol/trainer_events.h"
#include "worker/daemon/batches.h"

namespace spheret::worker {
namespace {

using protocol::kExitDiverged;
using protocol::kExitStopped;
static_assert(kMaxStdoutLineBytes == protocol::kMaxEventLineBytes);
constexpr int kMaxRejectionsLogged = 10;  // per attempt; the metric counts them all

// 16 random hex digits naming this daemon's run (two daemons with one worker id are told apart).
std::string RandomInstance() {
  std::random_device device;
  return absl::StrCat(absl::Hex(device(), absl::kZeroPad8), absl::Hex(device(), absl::kZeroPad8));
}

}  // namespace

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
