#include "server/decisions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/searches.h"
#include "server/trial_configs.h"

namespace spheret {

absl::Status Decisions::Restore() {
  std::lock_guard<std::mutex> lock(state_.mutex);
  return LoadLocked(state_.clock->NowMs(), /*after_failed_commit=*/false);
}

void Decisions::LoadSchedulerLocked(store::RestoredState& state) {
  sched::Scheduler& scheduler = state_.scheduler;
  scheduler = sched::Scheduler(state_.options.scheduler);
  TypeTrials(&state.live_trials);  // where a live trial's config enters: read from the store
  for (const SweepRecord& sweep : state.sweeps) scheduler.AddSweep(sweep);
  for (const TrialRecord& trial : state.live_trials) scheduler.AddTrial(trial);
  for (const WorkerRecord& worker : state.workers) scheduler.RestoreWorker(worker);
  for (const LeaseRecord& lease : state.leases) scheduler.RestoreLease(lease);
}

absl::Status Decisions::LoadLocked(int64_t now, bool after_failed_commit) {
  SPHERET_ASSIGN_OR_RETURN(store::RestoredState state, state_.store->LoadState());
  LoadSchedulerLocked(state);
  SPHERET_RETURN_IF_ERROR(searches_->LoadRungsLocked());
  // After a failed commit the coordinator never went away: memory becomes exactly the last
  // committed state (no downtime to make up for, no lease to extend).
  Changes changes;
  if (!after_failed_commit) {
    const int64_t downtime = state.last_alive_ms == 0 ? 0 : now - state.last_alive_ms;
    state_.scheduler.FinishRestore(downtime, now, &changes);
  }
  live_.ClearLocked();
  for (const TrialRecord& trial : state.live_trials) {
    const TrialRecord* live = state_.scheduler.FindTrial(trial.trial_id);
    const SweepRecord* sweep = state_.scheduler.FindSweep(trial.sweep_id);
    if (live != nullptr && live->state == TrialState::kRunning && sweep != nullptr) {
      live_.TrackRunningLocked(*live, sweep->name);
    }
  }
  last_decision_ms_ = now;
  std::vector<TrialRecord> trials = changes.trials;
  if (!changes.empty()) {
    SPHERET_RETURN_IF_ERROR(state_.store->Apply(std::move(changes), now).get());
  }
  TrackTrialsLocked(trials);
  if (after_failed_commit) return absl::OkStatus();
  return state_.store->SetLastAlive(now);
}

absl::Status Decisions::Decide(const std::function<absl::Status(int64_t, Changes*)>& decide) {
  std::future<absl::Status> commit;
  std::vector<TrialRecord> trials;
  uint64_t reloads = 0;
  absl::Status refused;
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    const int64_t now = state_.clock->NowMs();
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
    commit = state_.store->Apply(std::move(changes), now);
  }
  const absl::Status committed = commit.get();
  std::lock_guard<std::mutex> lock(state_.mutex);
  if (committed.ok()) {
    TrackTrialsLocked(trials);
    return refused;
  }
  return UndoLocked(committed, reloads);
}

absl::Status Decisions::UndoLocked(const absl::Status& committed, uint64_t reloads) {
  if (reloads != reloads_) return committed;  // another caller already undid it
  ++reloads_;
  spdlog::error("a commit failed, its decision and those after it are undone (callers retry): {}",
                std::string(committed.message()));
  // Memory goes back to what the store holds once every queued decision has settled: the last
  // committed state.
  absl::Status reloaded = state_.store->ResumeDecisions().get();
  if (reloaded.ok()) reloaded = LoadLocked(state_.clock->NowMs(), /*after_failed_commit=*/true);
  if (!reloaded.ok()) {
    return absl::UnavailableError(absl::StrCat(committed.message(),
                                               "; reloading the scheduler "
                                               "from the store also failed: ",
                                               reloaded.message()));
  }
  return committed;
}

void Decisions::NoticeStallLocked(int64_t now, Changes* changes) {
  const int64_t since = last_decision_ms_;
  last_decision_ms_ = std::max(last_decision_ms_, now);
  const CoordinatorOptions& options = state_.options;
  const int64_t interval = options.housekeeping_interval_ms;
  const int64_t stall_ms =
      options.stall_ms > 0
          ? options.stall_ms
          : std::max(2 * interval, std::min(4 * interval, options.scheduler.lease_ttl_ms / 3));
  if (since == 0 || now - since <= stall_ms) return;
  const int renewed = state_.scheduler.RenewAfterStall(since, now, changes);
  grants_from_ms_ = now + stall_ms;
  spdlog::warn(
      "the coordinator stalled: no decision for {} ms (more than {} ms); {} lease(s) of workers "
      "alive before it get a fresh TTL of {} ms instead of expiring; Acquire grants nothing for "
      "{} ms",
      now - since, stall_ms, renewed, options.scheduler.lease_ttl_ms, stall_ms);
  state_.metrics->AddStall(static_cast<double>(now - since) / 1000.0);
}

void Decisions::TrackTrialsLocked(const std::vector<TrialRecord>& trials) {
  for (const TrialRecord& trial : trials) ++state_.versions[trial.sweep_id];
  searches_->NoteEndedLocked(trials);
  live_.ForgetEndedLocked(trials);
  if (!trials.empty()) state_.changed.notify_all();
}

void Decisions::Admit(const store::SubmitOutcome& outcome) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    sched::Scheduler& scheduler = state_.scheduler;
    if (scheduler.FindSweep(outcome.sweep.sweep_id) == nullptr || !outcome.created.empty()) {
      scheduler.AddSweep(outcome.sweep);
    }
    for (TrialRecord trial : outcome.created) {
      TypeTrial(&trial);  // where a new trial's config enters: the store's record of it
      scheduler.AddTrial(trial);
    }
    ++state_.versions[outcome.sweep.sweep_id];
  }
  state_.changed.notify_all();
}

}  // namespace spheret
