#include "server/coordinator.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/sweep_expand.h"

namespace spheret {
namespace {

using nlohmann::json;

// The gauge labels of a trial: its sweep and the knobs a sweep usually varies.
metrics::TrialLabels LabelsOf(const TrialRecord& trial, const std::string& sweep_name) {
  const json config = json::parse(trial.config_json, nullptr, /*allow_exceptions=*/false);
  auto knob = [&](const char* key) -> std::string {
    if (!config.is_object() || !config.contains(key)) return "";
    const json& value = config.at(key);
    return value.is_string() ? value.get<std::string>() : value.dump();
  };
  return {{"sweep", sweep_name},    {"method", knob("method")},
          {"scale", knob("scale")}, {"p", knob("p")},
          {"seed", knob("seed")},   {"trial", std::to_string(trial.trial_id)}};
}

}  // namespace

Coordinator::Coordinator(store::Store* store, metrics::CoordinatorMetrics* metrics,
                         const Clock* clock, CoordinatorOptions options)
    : store_(store),
      metrics_(metrics),
      clock_(clock),
      options_(options),
      scheduler_(options.scheduler) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(
    store::Store* store, metrics::CoordinatorMetrics* metrics, const Clock* clock,
    CoordinatorOptions options) {
  std::unique_ptr<Coordinator> coordinator(new Coordinator(store, metrics, clock, options));
  SPHERET_RETURN_IF_ERROR(coordinator->Restore());
  store->OnCommit([metrics](double seconds) { metrics->ObserveCommit(seconds); });
  coordinator->housekeeping_ = std::thread([c = coordinator.get()] { c->Loop(); });
  return coordinator;
}

Coordinator::~Coordinator() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  store_->OnCommit(nullptr);
}

absl::Status Coordinator::Restore() {
  SPHERET_ASSIGN_OR_RETURN(store::RestoredState state, store_->LoadState());
  const int64_t now = clock_->NowMs();
  std::future<absl::Status> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const SweepRecord& sweep : state.sweeps) scheduler_.AddSweep(sweep);
    for (const TrialRecord& trial : state.live_trials) scheduler_.AddTrial(trial);
    for (const WorkerRecord& worker : state.workers) scheduler_.RestoreWorker(worker);
    for (const LeaseRecord& lease : state.leases) scheduler_.RestoreLease(lease);
    const int64_t downtime = state.last_alive_ms > 0 ? now - state.last_alive_ms : 0;
    Changes changes;
    scheduler_.FinishRestore(downtime, now, &changes);
    for (const TrialRecord& trial : state.live_trials) {
      const TrialRecord* live = scheduler_.FindTrial(trial.trial_id);
      const SweepRecord* sweep = scheduler_.FindSweep(trial.sweep_id);
      if (live != nullptr && live->state == TrialState::kRunning && sweep != nullptr) {
        labels_[trial.trial_id] = LabelsOf(*live, sweep->name);
      }
    }
    done = CommitLocked(std::move(changes), now);
  }
  SPHERET_RETURN_IF_ERROR(done.get());
  return store_->SetLastAlive(now);
}

std::future<absl::Status> Coordinator::CommitLocked(Changes changes, int64_t now_ms) {
  TrackTrialsLocked(changes);
  if (changes.empty()) {
    std::promise<absl::Status> nothing;
    nothing.set_value(absl::OkStatus());
    return nothing.get_future();
  }
  return store_->Apply(std::move(changes), now_ms);
}

void Coordinator::TrackTrialsLocked(const Changes& changes) {
  for (const TrialRecord& trial : changes.trials) {
    ++versions_[trial.sweep_id];
    if (trial.state != TrialState::kRunning && labels_.erase(trial.trial_id) > 0) {
      metrics_->TrialEnded(trial.trial_id);
    }
  }
  if (!changes.trials.empty()) changed_.notify_all();
}

absl::StatusOr<SubmitResult> Coordinator::Submit(const std::string& spec_yaml,
                                                 const std::string& idempotency_key, bool dry_run) {
  SPHERET_ASSIGN_OR_RETURN(SweepSpec spec, ParseSweepSpec(spec_yaml));
  SubmitResult result;
  SPHERET_ASSIGN_OR_RETURN(result.trials, ExpandSweep(spec, options_.limits));
  result.trial_count = static_cast<int64_t>(result.trials.size());
  if (dry_run) return result;
  SweepRecord sweep;
  sweep.name = spec.name;
  sweep.spec_yaml = spec_yaml;
  sweep.idempotency_key = idempotency_key;
  sweep.priority = spec.priority;
  sweep.max_restarts = spec.max_restarts;
  sweep.gpus = spec.resources.gpus;
  sweep.slots_per_node = spec.resources.SlotsPerNode();
  sweep.nodes = spec.resources.nodes;
  sweep.metric = spec.metric;
  sweep.minimize = spec.minimize;
  SPHERET_ASSIGN_OR_RETURN(store::SubmitOutcome outcome,
                           store_->SubmitSweep(sweep, result.trials, clock_->NowMs()));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (scheduler_.FindSweep(outcome.sweep.sweep_id) == nullptr || !outcome.created.empty()) {
      scheduler_.AddSweep(outcome.sweep);
    }
    for (const TrialRecord& trial : outcome.created) scheduler_.AddTrial(trial);
    ++versions_[outcome.sweep.sweep_id];
  }
  changed_.notify_all();
  result.sweep_id = outcome.sweep.sweep_id;
  result.trial_count = outcome.trial_count;
  result.created_trials = static_cast<int64_t>(outcome.created.size());
  return result;
}

absl::StatusOr<sched::CancelResult> Coordinator::CancelSweep(int64_t sweep_id) {
  std::future<absl::Status> done;
  absl::StatusOr<sched::CancelResult> result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Changes changes;
    const int64_t now = clock_->NowMs();
    result = scheduler_.CancelSweep(sweep_id, now, &changes);
    done = CommitLocked(std::move(changes), now);
    ++versions_[sweep_id];
  }
  changed_.notify_all();
  SPHERET_RETURN_IF_ERROR(done.get());
  return result;
}

absl::StatusOr<sched::CancelResult> Coordinator::CancelTrial(int64_t trial_id) {
  std::future<absl::Status> done;
  absl::StatusOr<sched::CancelResult> result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Changes changes;
    const int64_t now = clock_->NowMs();
    result = scheduler_.CancelTrial(trial_id, now, &changes);
    done = CommitLocked(std::move(changes), now);
  }
  SPHERET_RETURN_IF_ERROR(done.get());
  return result;
}

absl::StatusOr<std::vector<sched::RunningTrial>> Coordinator::Register(
    const WorkerRecord& worker, const std::vector<sched::RunningTrial>& running) {
  if (worker.worker_id.empty()) return absl::InvalidArgumentError("worker_id is empty");
  if (worker.gpus.empty() && worker.cpu_slots <= 0) {
    return absl::InvalidArgumentError("a worker needs GPUs or cpu_slots >= 1");
  }
  std::future<absl::Status> done;
  std::vector<sched::RunningTrial> reattached;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Changes changes;
    const int64_t now = clock_->NowMs();
    reattached = scheduler_.Register(worker, running, now, &changes);
    done = CommitLocked(std::move(changes), now);
  }
  SPHERET_RETURN_IF_ERROR(done.get());
  return reattached;
}

absl::StatusOr<sched::HeartbeatResult> Coordinator::Heartbeat(
    const std::string& worker_id, const std::vector<sched::RunningTrial>& running) {
  std::future<absl::Status> done;
  sched::HeartbeatResult result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Changes changes;
    const int64_t now = clock_->NowMs();
    result = scheduler_.Heartbeat(worker_id, running, now, &changes);
    done = CommitLocked(std::move(changes), now);
  }
  SPHERET_RETURN_IF_ERROR(done.get());
  return result;
}

absl::StatusOr<std::vector<LeaseGrant>> Coordinator::Acquire(const std::string& worker_id,
                                                             int free_slots, int rendezvous_port,
                                                             int max_trials) {
  const auto start = std::chrono::steady_clock::now();
  std::future<absl::Status> done;
  std::vector<LeaseGrant> grants;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Changes changes;
    const int64_t now = clock_->NowMs();
    SPHERET_ASSIGN_OR_RETURN(
        std::vector<LeaseRecord> leases,
        scheduler_.Acquire(worker_id, free_slots, rendezvous_port, max_trials, now, &changes));
    for (const LeaseRecord& lease : leases) {
      const TrialRecord* trial = scheduler_.FindTrial(lease.trial_id);
      const SweepRecord* sweep = scheduler_.FindSweep(trial->sweep_id);
      grants.push_back({lease, trial->config_json, trial->sweep_id});
      labels_[trial->trial_id] = LabelsOf(*trial, sweep->name);
    }
    done = CommitLocked(std::move(changes), now);
  }
  SPHERET_RETURN_IF_ERROR(done.get());
  metrics_->ObserveScheduleLatency(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return grants;
}

absl::StatusOr<int64_t> Coordinator::Report(const EventBatchRecord& batch) {
  metrics::TrialLabels labels;
  int64_t sweep_id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    SPHERET_RETURN_IF_ERROR(scheduler_.CheckFence(batch.trial_id, batch.attempt));
    labels = labels_[batch.trial_id];
    sweep_id = scheduler_.FindTrial(batch.trial_id)->sweep_id;
  }
  SPHERET_ASSIGN_OR_RETURN(int64_t inserted, store_->AppendEvents(batch));
  metrics_->AddMetricRows(inserted);
  for (const MetricRow& row : batch.metrics) {
    metrics_->TrialMetric(batch.trial_id, labels, row.name, row.value);
  }
  for (const auto& [seq, line] : batch.other_events) {
    const json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object() || event.value("type", "") != "diag") continue;
    metrics_->TrialGeometry(batch.trial_id, labels, event.value("layer", int64_t{0}),
                            event.value("sublayer", ""), event.value("hidden_norm", 0.0),
                            event.value("theta", 0.0));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++versions_[sweep_id];
  }
  changed_.notify_all();
  return inserted;
}

absl::StatusOr<TrialState> Coordinator::Finish(const AttemptEnd& end,
                                               const std::string& worker_id) {
  std::future<absl::Status> done;
  absl::StatusOr<TrialState> state;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Changes changes;
    AttemptEnd stamped = end;
    stamped.ended_ms = clock_->NowMs();
    state = scheduler_.Finish(stamped, worker_id, &changes);
    if (!state.ok()) return state.status();
    done = CommitLocked(std::move(changes), stamped.ended_ms);
  }
  SPHERET_RETURN_IF_ERROR(done.get());
  return state;
}

int64_t Coordinator::WaitForChange(int64_t sweep_id, int64_t seen, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                    [&] { return versions_[sweep_id] > seen; });
  return versions_[sweep_id];
}

void Coordinator::Housekeeping() {
  std::future<absl::Status> done;
  sched::SchedulerStats stats;
  int expired = 0;
  const int64_t now = clock_->NowMs();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Changes changes;
    expired = scheduler_.ExpireLeases(now, &changes);
    stats = scheduler_.Stats(now);
    done = CommitLocked(std::move(changes), now);
  }
  absl::Status committed = done.get();
  if (committed.ok()) committed = store_->SetLastAlive(now);
  metrics_->AddLeaseExpirations(expired);
  metrics_->SetQueueDepth(stats.pending);
  metrics_->SetWorkers(stats.workers_alive, stats.workers_stale);
  metrics_->SetSlots(stats.slots_busy, stats.slots_free);
  absl::StatusOr<std::map<std::string, int64_t>> counts = store_->CountTrials(0);
  if (counts.ok()) metrics_->SetTrialCounts(*counts);
}

void Coordinator::Loop() {
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stopping_) {
    lock.unlock();
    Housekeeping();
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.housekeeping_interval_ms),
                      [this] { return stopping_; });
  }
}

}  // namespace spheret
