#include "server/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "config/knob_text.h"
#include "config/trial_config.h"
#include "protocol/diag_values.h"
#include "server/sweep/sweep_expand.h"
#include "server/sweep/trial_depth.h"

namespace spheret {
namespace {
using nlohmann::json;

// The gauge labels of a trial: its sweep and the knobs that identify it (a string as it is, any
// other value as its JSON).
metrics::TrialLabels LabelsOf(const TrialRecord& trial, const TrialConfig& config,
                              const std::string& sweep_name) {
  metrics::TrialLabels labels = {{"sweep", sweep_name}, {"trial", std::to_string(trial.trial_id)}};
  for (const char* key : kIdentityKnobs) {
    const json* value = config.Find(key);
    if (value == nullptr) {
      labels[key] = "";
    } else {
      labels[key] = value->is_string() ? value->get<std::string>() : value->dump();
    }
  }
  return labels;
}

// InvalidArgument naming the trial, step and field of the first diag row that breaks the rules.
absl::Status CheckDiagRows(const EventBatchRecord& batch) {
  for (const DiagRecord& diag : batch.diags) {
    const std::string error = protocol::DiagRowError(diag.layer, diag.sublayer, diag.values);
    if (!error.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("trial ", batch.trial_id, ": diag row at step ", diag.step, ": ", error));
    }
  }
  return absl::OkStatus();
}

// The batch without its diag rows beyond a model `depth` deep (DiagRowWithinDepth), or nullopt
// when it has none or the depth is unknown (0: stored, not exported); counts their values.
std::optional<EventBatchRecord> DropRowsBeyondDepth(const EventBatchRecord& batch, int64_t depth,
                                                    int64_t* dropped_values) {
  auto beyond = [depth](const DiagRecord& diag) {
    return !DiagRowWithinDepth(depth, diag.layer, diag.sublayer);
  };
  if (depth <= 0 || std::none_of(batch.diags.begin(), batch.diags.end(), beyond)) {
    return std::nullopt;
  }
  EventBatchRecord kept = batch;
  kept.diags.clear();
  for (const DiagRecord& diag : batch.diags) {
    if (beyond(diag)) {
      *dropped_values += static_cast<int64_t>(diag.values.size());
    } else {
      kept.diags.push_back(diag);
    }
  }
  return kept;
}

// Each metric's last row of a batch only: a gauge shows the last value, and an export locks.
void ExportLatest(metrics::CoordinatorMetrics* gauges, int64_t trial_id,
                  const metrics::TrialLabels& labels, const std::vector<MetricRow>& rows) {
  std::unordered_set<std::string_view> seen;
  for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
    if (seen.insert(row->name).second) gauges->TrialMetric(trial_id, labels, row->name, row->value);
  }
}

}  // namespace

Coordinator::Coordinator(store::Store* store, metrics::CoordinatorMetrics* metrics,
                         const Clock* clock, CoordinatorOptions options)
    : store_(store),
      metrics_(metrics),
      clock_(clock),
      options_(options),
      tokens_(store, clock),
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
  std::lock_guard<std::mutex> lock(mutex_);
  return LoadLocked(clock_->NowMs(), /*after_failed_commit=*/false);
}

absl::Status Coordinator::LoadLocked(int64_t now, bool after_failed_commit) {
  SPHERET_ASSIGN_OR_RETURN(store::RestoredState state, store_->LoadState());
  scheduler_ = sched::Scheduler(options_.scheduler);
  for (const SweepRecord& sweep : state.sweeps) scheduler_.AddSweep(sweep);
  for (const TrialRecord& trial : state.live_trials) scheduler_.AddTrial(trial);
  for (const WorkerRecord& worker : state.workers) scheduler_.RestoreWorker(worker);
  for (const LeaseRecord& lease : state.leases) scheduler_.RestoreLease(lease);
  SPHERET_RETURN_IF_ERROR(LoadRungsLocked());
  // After a failed commit the coordinator never went away: memory becomes exactly the last
  // committed state (no downtime to make up for, no lease to extend).
  Changes changes;
  if (!after_failed_commit) {
    const int64_t downtime = state.last_alive_ms == 0 ? 0 : now - state.last_alive_ms;
    scheduler_.FinishRestore(downtime, now, &changes);
  }
  live_.clear();
  for (const TrialRecord& trial : state.live_trials) {
    const TrialRecord* live = scheduler_.FindTrial(trial.trial_id);
    const SweepRecord* sweep = scheduler_.FindSweep(trial.sweep_id);
    if (live != nullptr && live->state == TrialState::kRunning && sweep != nullptr) {
      TrackRunningLocked(*live, sweep->name);
    }
  }
  last_decision_ms_ = now;
  std::vector<TrialRecord> trials = changes.trials;
  if (!changes.empty()) SPHERET_RETURN_IF_ERROR(store_->Apply(std::move(changes), now).get());
  TrackTrialsLocked(trials);
  if (after_failed_commit) return absl::OkStatus();
  return store_->SetLastAlive(now);
}

absl::Status Coordinator::Decide(const std::function<absl::Status(int64_t, Changes*)>& decide) {
  std::future<absl::Status> commit;
  std::vector<TrialRecord> trials;
  uint64_t reloads = 0;
  absl::Status refused;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t now = clock_->NowMs();
    Changes changes;
    NoticeStallLocked(now, &changes);  // before the decision, which may expire leases
    Changes decided;
    refused = decide(now, &decided);  // a refusal changes nothing (a stall's renewal stands)
    if (refused.ok()) {  // the renewal (lease puts only) first: the decision's own puts win
      decided.leases_put.insert(decided.leases_put.begin(), changes.leases_put.begin(),
                                changes.leases_put.end());
      changes = std::move(decided);
    }
    if (changes.empty()) return refused;
    trials = changes.trials;
    reloads = reloads_;
    // Queued in decision order. Later decisions may build on this one before it commits (they
    // group into one transaction), but the store writes none of them once it has failed.
    commit = store_->Apply(std::move(changes), now);
  }
  const absl::Status committed = commit.get();
  std::lock_guard<std::mutex> lock(mutex_);
  if (committed.ok()) {
    TrackTrialsLocked(trials);
    return refused;
  }
  if (reloads != reloads_) return committed;  // another caller already undid it
  ++reloads_;
  spdlog::error("a commit failed, its decision and those after it are undone (callers retry): {}",
                std::string(committed.message()));
  // Memory goes back to what the store holds once every queued decision has settled: the last
  // committed state.
  absl::Status reloaded = store_->ResumeDecisions().get();
  if (reloaded.ok()) reloaded = LoadLocked(clock_->NowMs(), /*after_failed_commit=*/true);
  if (!reloaded.ok()) {
    return absl::UnavailableError(absl::StrCat(committed.message(),
                                               "; reloading the scheduler "
                                               "from the store also failed: ",
                                               reloaded.message()));
  }
  return committed;
}

void Coordinator::TrackRunningLocked(const TrialRecord& trial, const std::string& sweep_name) {
  LiveTrial& live = live_[trial.trial_id];
  const TrialConfig config(trial.config_json);
  live.labels = LabelsOf(trial, config, sweep_name);
  live.depth = TrialDepth(config);
  if (live.depth == 0) {
    spdlog::warn(
        "trial {}: its config does not resolve to a model depth; its per-layer values "
        "are stored but not exported",
        trial.trial_id);
  }
}

void Coordinator::DroppedRows(int64_t trial_id, int64_t depth, int64_t values) {
  metrics_->AddDroppedLayerValues(values);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto live = live_.find(trial_id);
    if (live == live_.end() || live->second.dropped_rows_logged) return;
    live->second.dropped_rows_logged = true;  // once per trial: a worker could send many
  }
  spdlog::warn(
      "trial {}: diag rows beyond its model's depth of {} are dropped (neither stored nor "
      "exported; counted in spheret_layer_values_unexported_total{{reason=\"layer\"}})",
      trial_id, depth);
}

void Coordinator::TrackTrialsLocked(const std::vector<TrialRecord>& trials) {
  for (const TrialRecord& trial : trials) {
    ++versions_[trial.sweep_id];
    if (trial.role == "search" && IsTerminal(trial.state)) confirm_due_.insert(trial.sweep_id);
    if (trial.state != TrialState::kRunning && live_.erase(trial.trial_id) > 0) {
      metrics_->TrialEnded(trial.trial_id);
    }
  }
  if (!trials.empty()) changed_.notify_all();
}

absl::StatusOr<SubmitResult> Coordinator::Submit(const std::string& spec_yaml,
                                                 const std::string& idempotency_key, bool dry_run,
                                                 const Interrupt& interrupt,
                                                 const ConnectionFiles& files) {
  SPHERET_ASSIGN_OR_RETURN(SweepSpec spec, ParseSweepSpec(spec_yaml));
  SPHERET_RETURN_IF_ERROR(CheckConnectionFiles(files));
  spec.connection_files = files;
  SubmitResult result;
  SPHERET_ASSIGN_OR_RETURN(result.trials,
                           ExpandSweep(spec, options_.limits, interrupt, &result.notices));
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
  sweep.search = spec.search;
  SPHERET_ASSIGN_OR_RETURN(store::SubmitOutcome outcome,
                           store_->SubmitSweep(sweep, result.trials, clock_->NowMs()));
  Admit(outcome);
  result.sweep_id = outcome.sweep.sweep_id;
  result.trial_count = outcome.trial_count;
  result.created_trials = static_cast<int64_t>(outcome.created.size());
  return result;
}

void Coordinator::Admit(const store::SubmitOutcome& outcome) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (scheduler_.FindSweep(outcome.sweep.sweep_id) == nullptr || !outcome.created.empty()) {
      scheduler_.AddSweep(outcome.sweep);
    }
    for (const TrialRecord& trial : outcome.created) scheduler_.AddTrial(trial);
    ++versions_[outcome.sweep.sweep_id];
  }
  changed_.notify_all();
}

absl::StatusOr<sched::CancelResult> Coordinator::CancelSweep(int64_t sweep_id) {
  sched::CancelResult result;
  SPHERET_RETURN_IF_ERROR(Decide([&](int64_t /*now*/, Changes* changes) -> absl::Status {
    SPHERET_ASSIGN_OR_RETURN(result, scheduler_.CancelSweep(sweep_id, changes));
    ++versions_[sweep_id];
    return absl::OkStatus();
  }));
  changed_.notify_all();
  return result;
}

absl::StatusOr<sched::CancelResult> Coordinator::CancelTrial(int64_t trial_id) {
  sched::CancelResult result;
  SPHERET_RETURN_IF_ERROR(Decide([&](int64_t /*now*/, Changes* changes) -> absl::Status {
    result = scheduler_.CancelTrial(trial_id, changes);
    return absl::OkStatus();
  }));
  return result;
}

absl::StatusOr<int64_t> Coordinator::Ingest(const EventBatchRecord& batch,
                                            const std::string& worker_id) {
  LiveTrial live;
  int64_t sweep_id = 0, evals_of = 0;
  bool judged = false;  // a search trial of an ASHA sweep: its metric is judged at rungs
  bool lapsed = false;  // a lapsed attempt's (Scheduler::LapsedTrial): stored, not exported
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const TrialRecord* trial = nullptr;
    if (absl::Status held = scheduler_.CheckHolder(batch.trial_id, batch.attempt, worker_id);
        held.ok()) {
      live = live_[batch.trial_id];  // tracked, so that its gauges go when it ends
      trial = scheduler_.FindTrial(batch.trial_id);
    } else {
      trial = scheduler_.LapsedTrial(batch.trial_id, batch.attempt, worker_id);
      if (trial == nullptr) return held;
      lapsed = true;
      live.depth = TrialDepth(TrialConfig(trial->config_json));
    }
    sweep_id = trial->sweep_id;
    evals_of = trial->eval_of;  // an evaluation job's scores belong to the trial it scores
    const SweepRecord* sweep = scheduler_.FindSweep(sweep_id);
    judged = !lapsed && trial->role == "search" && sweep != nullptr && sweep->search.asha() &&
             !trial->prune_exempt && !trial->prune_requested && !batch.metrics.empty();
  }
  SPHERET_RETURN_IF_ERROR(CheckDiagRows(batch));
  int64_t dropped = 0;  // values of rows beyond the trial's depth: neither stored nor exported
  std::optional<EventBatchRecord> trimmed = DropRowsBeyondDepth(batch, live.depth, &dropped);
  if (evals_of > 0) {
    if (!trimmed) trimmed = batch;
    trimmed->evals_of = evals_of;
  }
  const EventBatchRecord& kept = trimmed ? *trimmed : batch;
  if (dropped > 0) DroppedRows(batch.trial_id, live.depth, dropped);
  SPHERET_ASSIGN_OR_RETURN(int64_t inserted, store_->AppendEvents(kept));
  // After the rows are stored; a batch sent again (its answer lost) is judged again, and finds
  // its rungs already judged (the trial's rung count moved past them).
  if (judged) SPHERET_RETURN_IF_ERROR(JudgeBatch(batch));
  metrics_->AddMetricRows(inserted);
  if (!lapsed) {  // a trial that is not RUNNING has no gauges (they would never be removed)
    ExportLatest(metrics_, batch.trial_id, live.labels, kept.metrics);
    for (const DiagRecord& diag : kept.diags) {
      metrics_->TrialLayerValues(batch.trial_id, live.labels, live.depth, diag.layer, diag.sublayer,
                                 diag.values);
    }
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
  TrialState state = TrialState::kPending;
  SPHERET_RETURN_IF_ERROR(Decide([&](int64_t now, Changes* changes) -> absl::Status {
    AttemptEnd stamped = end;
    stamped.ended_ms = now;
    SPHERET_ASSIGN_OR_RETURN(state, scheduler_.Finish(stamped, worker_id, changes));
    return absl::OkStatus();
  }));
  ConfirmDue();
  return state;
}

int64_t Coordinator::WaitForChange(int64_t sweep_id, int64_t seen, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                    [&] { return versions_[sweep_id] > seen; });
  return versions_[sweep_id];
}

}  // namespace spheret
