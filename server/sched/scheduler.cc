#include "server/sched/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace spheret::sched {

std::vector<int> Scheduler::WorkerEntry::Slots() const {
  if (gpu()) return record.gpus;
  std::vector<int> slots(std::max(record.cpu_slots, 0));
  for (int i = 0; i < static_cast<int>(slots.size()); ++i) slots[i] = i;
  return slots;
}

bool Scheduler::Alive(const WorkerEntry& worker, int64_t now_ms) const {
  return now_ms - worker.record.last_seen_ms <= options_.lease_ttl_ms;
}

void Scheduler::AddSweep(const SweepRecord& sweep) {
  SweepEntry& entry = sweeps_[sweep.sweep_id];
  entry.record = sweep;
}

void Scheduler::AddTrial(const TrialRecord& trial) {
  if (IsTerminal(trial.state) || trials_.count(trial.trial_id) != 0) return;
  auto sweep = sweeps_.find(trial.sweep_id);
  if (sweep == sweeps_.end()) return;
  trials_[trial.trial_id] = trial;
  ++sweep->second.live;
  if (trial.state == TrialState::kPending) sweep->second.pending.insert(trial.trial_id);
}

void Scheduler::RestoreWorker(const WorkerRecord& worker) {
  workers_[worker.worker_id].record = worker;
}

void Scheduler::RestoreLease(const LeaseRecord& lease) {
  leases_[lease.trial_id].push_back(lease);
  auto worker = workers_.find(lease.worker_id);
  if (worker != workers_.end()) {
    worker->second.busy.insert(lease.slots.begin(), lease.slots.end());
  }
}

void Scheduler::FinishRestore(int64_t downtime_ms, int64_t now_ms, Changes* changes) {
  // Workers could not renew while the coordinator was away: push every lease by the downtime,
  // and leave reconnecting workers at least one full TTL from now to reach it again.
  for (auto& [trial_id, members] : leases_) {
    for (LeaseRecord& lease : members) {
      lease.expires_ms = std::max(lease.expires_ms + std::max<int64_t>(downtime_ms, 0),
                                  now_ms + options_.lease_ttl_ms);
      changes->leases_put.push_back(lease);
    }
  }
  // Workers were away through no fault of their own: count them as seen now.
  for (auto& [id, worker] : workers_) worker.record.last_seen_ms = now_ms;
  for (auto& [trial_id, trial] : trials_) {
    if (trial.state == TrialState::kRunning && leases_.count(trial_id) == 0) {
      EndAttempt(trial, TrialState::kFailed, -1, "lease lost", now_ms, changes);
    }
  }
}

bool Scheduler::SameDaemon(const WorkerEntry& worker, const std::string& instance) {
  return instance.empty() || worker.record.instance.empty() || worker.record.instance == instance;
}

absl::StatusOr<std::vector<AttemptId>> Scheduler::Register(const WorkerRecord& worker,
                                                           const std::vector<AttemptId>& running,
                                                           int64_t now_ms, Changes* changes,
                                                           const std::vector<AttemptId>& finished) {
  auto known = workers_.find(worker.worker_id);
  if (known != workers_.end() && !SameDaemon(known->second, worker.instance) &&
      Alive(known->second, now_ms)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "worker id '", worker.worker_id, "' is in use by another live daemon (last heard ",
        now_ms - known->second.record.last_seen_ms,
        " ms ago); give this one another --worker-id, or stop the other (a daemon that died is "
        "replaced once its lease TTL of ",
        options_.lease_ttl_ms, " ms has passed)"));
  }
  WorkerEntry& entry = workers_[worker.worker_id];
  const int64_t registered_ms = entry.record.registered_ms;
  entry.record = worker;
  entry.record.last_seen_ms = now_ms;
  entry.record.registered_ms = registered_ms != 0 ? registered_ms : now_ms;
  changes->workers.push_back(entry.record);
  const std::set<AttemptId> listed(running.begin(), running.end());
  const std::set<AttemptId> ended(finished.begin(), finished.end());
  std::vector<AttemptId> reattached;
  std::vector<int64_t> lost;
  for (auto& [trial_id, members] : leases_) {
    for (LeaseRecord& lease : members) {
      if (lease.worker_id != worker.worker_id) continue;
      const AttemptId id(trial_id, lease.attempt);
      if (listed.count(id) != 0 || ended.count(id) != 0) {
        lease.expires_ms = now_ms + options_.lease_ttl_ms;
        lease.delivered = true;
        changes->leases_put.push_back(lease);
        // A finished attempt keeps its lease until its Finish arrives; it is not running.
        if (listed.count(id) != 0) reattached.push_back(id);
      } else if (lease.delivered) {
        lost.push_back(trial_id);
      }
    }
  }
  for (int64_t trial_id : lost) {
    Lapse(trial_id, "lease lost: worker " + worker.worker_id + " registered again without it",
          now_ms, changes);
  }
  std::vector<AttemptId> claims = running;
  claims.insert(claims.end(), finished.begin(), finished.end());
  Reclaim(entry, claims, ended, now_ms, changes, &reattached);
  return reattached;
}

HeartbeatResult Scheduler::Heartbeat(const std::string& worker_id, const std::string& instance,
                                     const std::vector<AttemptId>& running, int64_t now_ms,
                                     Changes* changes, const std::vector<AttemptId>& finished) {
  HeartbeatResult result;
  auto worker = workers_.find(worker_id);
  if (worker == workers_.end() || !SameDaemon(worker->second, instance)) {
    result.known = false;  // unknown, or replaced by another daemon: stop and register again
    if (worker != workers_.end()) result.stop = running;
    return result;
  }
  if (worker->second.record.instance.empty()) worker->second.record.instance = instance;
  worker->second.record.last_seen_ms = now_ms;
  changes->workers.push_back(worker->second.record);
  const std::set<AttemptId> ended(finished.begin(), finished.end());
  std::vector<AttemptId> claims = running, revived;
  claims.insert(claims.end(), finished.begin(), finished.end());
  Reclaim(worker->second, claims, ended, now_ms, changes, &revived);
  const std::set<AttemptId> listed(claims.begin(), claims.end());
  std::set<AttemptId> held;
  for (auto& [trial_id, members] : leases_) {
    for (LeaseRecord& lease : members) {
      if (lease.worker_id != worker_id) continue;
      held.emplace(trial_id, lease.attempt);
      // A delivered lease the worker neither runs nor has a Finish of (its daemon restarted, the
      // Acquire reply was lost) is not renewed, and so expires within the TTL.
      if (lease.delivered && listed.count({trial_id, lease.attempt}) == 0) continue;
      lease.expires_ms = now_ms + options_.lease_ttl_ms;
      changes->leases_put.push_back(lease);
    }
  }
  for (const AttemptId& trial : running) {
    const TrialRecord* record = FindTrial(trial.first);
    if (held.count(trial) == 0 || record == nullptr || record->cancel_requested ||
        record->prune_requested) {
      result.stop.push_back(trial);
    }
  }
  return result;
}

absl::Status Scheduler::CheckFence(int64_t trial_id, int attempt) const {
  const TrialRecord* trial = FindTrial(trial_id);
  if (trial == nullptr || trial->state != TrialState::kRunning || trial->attempt != attempt) {
    return absl::FailedPreconditionError(absl::StrCat(
        "trial ", trial_id, " attempt ", attempt, " is not live (",
        trial == nullptr ? "trial ended or unknown"
                         : absl::StrCat(TrialStateName(trial->state), ", attempt ", trial->attempt),
        ")"));
  }
  return absl::OkStatus();
}

void Scheduler::DropLeases(int64_t trial_id, Changes* changes) {
  auto leases = leases_.find(trial_id);
  if (leases == leases_.end()) return;
  for (const LeaseRecord& lease : leases->second) {
    auto worker = workers_.find(lease.worker_id);
    if (worker == workers_.end()) continue;
    for (int slot : lease.slots) worker->second.busy.erase(slot);
  }
  leases_.erase(leases);
  changes->leases_dropped.push_back(trial_id);
}

void Scheduler::SetTerminal(TrialRecord& trial, TrialState state, Changes* changes) {
  trial.state = state;
  changes->trials.push_back(trial);
  SweepEntry& sweep = sweeps_.at(trial.sweep_id);
  sweep.pending.erase(trial.trial_id);
  // A search with confirm trials to come stays ACTIVE when its last search trial ends: the
  // coordinator adds them, or closes it (CloseIfIdle) when its groups have nothing to confirm.
  const bool confirm_follows = trial.role == "search" && !sweep.record.search.confirm_seeds.empty();
  if (--sweep.live == 0 && sweep.record.state == SweepState::kActive && !confirm_follows) {
    sweep.record.state = SweepState::kDone;
    changes->sweeps.emplace_back(sweep.record.sweep_id, SweepState::kDone);
  }
  lapsed_.erase(trial.trial_id);  // ended otherwise than by a lapse (Lapse keeps its own)
  trials_.erase(trial.trial_id);  // `trial` dangles from here on
}

void Scheduler::EndAttempt(TrialRecord& trial, TrialState outcome, int exit_code, std::string error,
                           int64_t now_ms, Changes* changes) {
  changes->attempts_ended.push_back(
      {trial.trial_id, trial.attempt, outcome, exit_code, error, now_ms});
  DropLeases(trial.trial_id, changes);
  const SweepEntry& sweep = sweeps_.at(trial.sweep_id);
  if (trial.cancel_requested || sweep.record.state == SweepState::kCancelled) {
    return SetTerminal(trial, TrialState::kCancelled, changes);
  }
  // Stopped by its search: whether the trainer stopped, was handed back or died meanwhile.
  if (trial.prune_requested &&
      (outcome == TrialState::kCancelled || outcome == TrialState::kPending ||
       outcome == TrialState::kFailed)) {
    return SetTerminal(trial, TrialState::kPruned, changes);
  }
  if (outcome == TrialState::kPending) {  // handed back by a worker that is shutting down
    trial.state = TrialState::kPending;
    trial.not_before_ms = now_ms;
    trial.error = error;
    sweeps_.at(trial.sweep_id).pending.insert(trial.trial_id);
    changes->trials.push_back(trial);
    return;
  }
  if (outcome == TrialState::kFailed) ++trial.failures;
  if (outcome == TrialState::kFailed && trial.failures <= sweep.record.max_restarts) {
    const int shift = std::min(trial.failures - 1, 20);
    trial.state = TrialState::kPending;
    trial.not_before_ms =
        now_ms + std::min(options_.backoff_base_ms << std::max(shift, 0), options_.backoff_max_ms);
    trial.error = error;
    sweeps_.at(trial.sweep_id).pending.insert(trial.trial_id);
    changes->trials.push_back(trial);
    return;
  }
  if (outcome == TrialState::kFailed) {
    trial.error = absl::StrCat(error, " (failure ", trial.failures, " of ",
                               sweep.record.max_restarts + 1, ", attempt ", trial.attempt, ")");
  }
  SetTerminal(trial, outcome, changes);
}

absl::Status Scheduler::CheckHolder(int64_t trial_id, int attempt,
                                    const std::string& worker_id) const {
  if (absl::Status fence = CheckFence(trial_id, attempt); !fence.ok()) return fence;
  if (worker_id.empty()) return absl::OkStatus();
  const std::vector<LeaseRecord>* leases = FindLeases(trial_id);
  if (leases == nullptr || std::none_of(leases->begin(), leases->end(), [&](const LeaseRecord& l) {
        return l.worker_id == worker_id;
      })) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker '", worker_id, "' holds no lease on trial ", trial_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrialState> Scheduler::Finish(const AttemptEnd& end, const std::string& worker_id,
                                             Changes* changes) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id is empty");
  if (end.outcome == TrialState::kRunning) {
    return absl::InvalidArgumentError(
        "outcome must be SUCCEEDED, FAILED, DIVERGED, CANCELLED or PENDING (hand back)");
  }
  if (absl::Status held = CheckHolder(end.trial_id, end.attempt, worker_id); !held.ok()) {
    // A refusal must change nothing: a lapsed attempt is revived only when it then ends here.
    auto worker = workers_.find(worker_id);
    const AttemptId id(end.trial_id, end.attempt);
    if (worker == workers_.end() || LapsedTrial(id.first, id.second, worker_id) == nullptr) {
      return held;
    }
    std::vector<AttemptId> unused;
    Reclaim(worker->second, {id}, {id}, end.ended_ms, changes, &unused);
    if (!CheckHolder(end.trial_id, end.attempt, worker_id).ok()) return held;
  }
  TrialRecord& trial = trials_.at(end.trial_id);
  const int64_t trial_id = trial.trial_id;
  std::string error = end.outcome == TrialState::kFailed
                          ? absl::StrCat("trainer exited with code ", end.exit_code)
                      : end.outcome == TrialState::kPending ? "handed back by worker " + worker_id
                                                            : "";
  EndAttempt(trial, end.outcome, end.exit_code, error, end.ended_ms, changes);
  changes->attempts_ended.back().stderr_tail = end.stderr_tail;
  const TrialRecord* live = FindTrial(trial_id);
  return live != nullptr ? live->state : changes->trials.back().state;
}

CancelResult Scheduler::CancelTrial(int64_t trial_id, Changes* changes) {
  CancelResult result;
  auto found = trials_.find(trial_id);
  if (found == trials_.end()) return result;  // already ended (or unknown): nothing to stop
  TrialRecord& trial = found->second;
  if (trial.state == TrialState::kPending) {
    SetTerminal(trial, TrialState::kCancelled, changes);
    result.cancelled_pending = 1;
  } else if (!trial.cancel_requested) {
    trial.cancel_requested = true;
    changes->trials.push_back(trial);
    result.stopping_running = 1;
  }
  return result;
}

absl::StatusOr<CancelResult> Scheduler::CancelSweep(int64_t sweep_id, Changes* changes) {
  auto sweep = sweeps_.find(sweep_id);
  if (sweep == sweeps_.end()) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  std::vector<int64_t> live;
  for (const auto& [id, trial] : trials_) {
    if (trial.sweep_id == sweep_id) live.push_back(id);
  }
  std::sort(live.begin(), live.end());
  CancelResult total;
  for (int64_t id : live) {
    const CancelResult one = CancelTrial(id, changes);
    total.cancelled_pending += one.cancelled_pending;
    total.stopping_running += one.stopping_running;
  }
  if (sweep->second.record.state == SweepState::kActive) {
    sweep->second.record.state = SweepState::kCancelled;
    changes->sweeps.emplace_back(sweep_id, SweepState::kCancelled);
  }
  return total;
}

SchedulerStats Scheduler::Stats(int64_t now_ms) const {
  SchedulerStats stats;
  // From the pending sets (every PENDING live trial is in its sweep's, as Acquire needs), not a
  // walk over every live trial (100,000 in bench_coordinator_load) while housekeeping holds the
  // coordinator's lock.
  for (const auto& [id, sweep] : sweeps_)
    stats.pending += static_cast<int64_t>(sweep.pending.size());
  stats.running = static_cast<int64_t>(trials_.size()) - stats.pending;
  for (const auto& [id, worker] : workers_) {
    if (!Alive(worker, now_ms)) {
      ++stats.workers_stale;
      continue;
    }
    ++stats.workers_alive;
    stats.slots_busy += worker.busy.size();
    stats.slots_free += worker.Free();
  }
  return stats;
}

const TrialRecord* Scheduler::FindTrial(int64_t trial_id) const {
  auto found = trials_.find(trial_id);
  return found == trials_.end() ? nullptr : &found->second;
}

const std::vector<LeaseRecord>* Scheduler::FindLeases(int64_t trial_id) const {
  auto found = leases_.find(trial_id);
  return found == leases_.end() ? nullptr : &found->second;
}

const SweepRecord* Scheduler::FindSweep(int64_t sweep_id) const {
  auto found = sweeps_.find(sweep_id);
  return found == sweeps_.end() ? nullptr : &found->second.record;
}

}  // namespace spheret::sched
