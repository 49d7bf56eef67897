#include "server/lease_keeper.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/evaluations.h"

namespace spheret {
namespace {

// What one worker may declare: every scheduling pass walks its slots.
constexpr int kMaxCpuSlots = 4096;
constexpr size_t kMaxGpus = 64;

// InvalidArgument naming the field of a worker's registration that is out of bounds.
absl::Status CheckWorker(const WorkerRecord& worker) {
  if (worker.worker_id.empty() || worker.worker_id.size() > 128) {
    return absl::InvalidArgumentError("worker_id must have 1 to 128 characters");
  }
  if (worker.host.size() > 255) return absl::InvalidArgumentError("host is over 255 characters");
  if (worker.gpus.empty() && (worker.cpu_slots < 1 || worker.cpu_slots > kMaxCpuSlots)) {
    return absl::InvalidArgumentError(absl::StrCat("a worker needs GPUs or cpu_slots in [1, ",
                                                   kMaxCpuSlots, "], got ", worker.cpu_slots));
  }
  const std::set<int> distinct(worker.gpus.begin(), worker.gpus.end());
  if (worker.gpus.size() > kMaxGpus || distinct.size() != worker.gpus.size() ||
      (!distinct.empty() && (*distinct.begin() < 0 || *distinct.rbegin() >= 1024))) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus must be at most ", kMaxGpus, " distinct indices in [0, 1024)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<sched::AttemptId>> LeaseKeeper::Register(
    const WorkerRecord& worker, const std::vector<sched::AttemptId>& running,
    const std::vector<sched::AttemptId>& finished) {
  SPHERET_RETURN_IF_ERROR(CheckWorker(worker));
  std::vector<sched::AttemptId> reattached;
  SPHERET_RETURN_IF_ERROR(decisions_.Decide([&](int64_t now, Changes* changes) -> absl::Status {
    SPHERET_ASSIGN_OR_RETURN(reattached,
                             state_.scheduler.Register(worker, running, now, changes, finished));
    live_.TrackRevivedLocked(*changes);
    return absl::OkStatus();
  }));
  return reattached;
}

absl::StatusOr<sched::HeartbeatResult> LeaseKeeper::Heartbeat(
    const std::string& worker_id, const std::string& instance,
    const std::vector<sched::AttemptId>& running, const std::vector<sched::AttemptId>& finished) {
  sched::HeartbeatResult result;
  SPHERET_RETURN_IF_ERROR(decisions_.Decide([&](int64_t now, Changes* changes) {
    result = state_.scheduler.Heartbeat(worker_id, instance, running, now, changes, finished);
    live_.TrackRevivedLocked(*changes);
    return absl::OkStatus();
  }));
  return result;
}

absl::StatusOr<std::vector<Lease>> LeaseKeeper::GrantLocked(const std::string& worker_id,
                                                            const std::string& instance,
                                                            int free_slots, int rendezvous_port,
                                                            int max_trials, int64_t now,
                                                            Changes* changes) {
  if (const int64_t from = decisions_.GrantsFromLocked(); now < from) {
    return absl::UnavailableError(
        absl::StrCat("the coordinator is resuming after a stall; it grants leases again in ",
                     from - now, " ms"));
  }
  sched::Scheduler& scheduler = state_.scheduler;
  SPHERET_ASSIGN_OR_RETURN(std::vector<LeaseRecord> leases,
                           scheduler.Acquire(worker_id, instance, free_slots, rendezvous_port,
                                             max_trials, now, changes));
  std::vector<Lease> grants;
  for (const LeaseRecord& lease : leases) {
    const TrialRecord* trial = scheduler.FindTrial(lease.trial_id);
    const SweepRecord* sweep = scheduler.FindSweep(trial->sweep_id);
    grants.push_back({lease, trial->config_json, trial->sweep_id, EvalWorkOf(*trial)});
    if (!live_.TrackedLocked(trial->trial_id)) live_.TrackRunningLocked(*trial, sweep->name);
  }
  return grants;
}

absl::StatusOr<std::vector<Lease>> LeaseKeeper::Acquire(const std::string& worker_id,
                                                        const std::string& instance, int free_slots,
                                                        int rendezvous_port, int max_trials,
                                                        const Interrupt& gone) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Lease> grants;
  SPHERET_RETURN_IF_ERROR(decisions_.Decide([&](int64_t now, Changes* changes) -> absl::Status {
    if (gone) SPHERET_RETURN_IF_ERROR(gone());  // it waited past its deadline for the lock
    SPHERET_ASSIGN_OR_RETURN(grants, GrantLocked(worker_id, instance, free_slots, rendezvous_port,
                                                 max_trials, now, changes));
    return absl::OkStatus();
  }));
  state_.metrics->ObserveScheduleLatency(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // The commit may have waited (a slow disk, a busy database) past the caller's deadline: an
  // answer now reaches no one, and its leases would expire as failures.
  if (absl::Status late = gone ? gone() : absl::OkStatus(); !late.ok() && !grants.empty()) {
    HandBack(grants, worker_id, late);
    return late;
  }
  return grants;
}

void LeaseKeeper::HandBack(const std::vector<Lease>& grants, const std::string& worker_id,
                           const absl::Status& why) {
  for (const Lease& grant : grants) {
    AttemptEnd end;
    end.trial_id = grant.record.trial_id;
    end.attempt = grant.record.attempt;
    end.outcome = TrialState::kPending;
    end.exit_code = -1;
    end.stderr_tail = absl::StrCat("not delivered: the Acquire call ended before its answer (",
                                   why.message(), "); handed back");
    // A failed hand-back (a failed commit) leaves the lease to expire in its TTL, as before.
    if (absl::StatusOr<TrialState> ended = Finish(end, worker_id); !ended.ok()) {
      spdlog::warn("trial {} attempt {}: cannot hand back an undelivered lease: {}", end.trial_id,
                   end.attempt, ended.status().ToString());
    }
  }
  spdlog::warn("worker {}: {} lease(s) granted after its Acquire ended ({}) handed back", worker_id,
               grants.size(), std::string(why.message()));
}

absl::StatusOr<TrialState> LeaseKeeper::Finish(const AttemptEnd& end,
                                               const std::string& worker_id) {
  TrialState state = TrialState::kPending;
  SPHERET_RETURN_IF_ERROR(decisions_.Decide([&](int64_t now, Changes* changes) -> absl::Status {
    AttemptEnd stamped = end;
    stamped.ended_ms = now;
    SPHERET_ASSIGN_OR_RETURN(state, state_.scheduler.Finish(stamped, worker_id, changes));
    return absl::OkStatus();
  }));
  searches_.ConfirmDue();
  return state;
}

void LeaseKeeper::Housekeeping() {
  sched::SchedulerStats stats;
  int expired = 0;
  absl::Status committed = decisions_.Decide([&](int64_t now, Changes* changes) {
    expired = state_.scheduler.ExpireLeases(now, changes);
    stats = state_.scheduler.Stats(now);
    return absl::OkStatus();
  });
  if (committed.ok()) {
    committed = state_.store->SetLastAlive(state_.clock->NowMs());
    // Said once per outage: a restart before it ends extends leases from the last mark.
    if (!committed.ok() && !liveness_failing_) {
      spdlog::warn("cannot record the liveness mark: {}", std::string(committed.message()));
    }
    liveness_failing_ = !committed.ok();
  }
  state_.metrics->AddLeaseExpirations(committed.ok() ? expired : 0);
  SetGauges(stats);
}

void LeaseKeeper::SetGauges(const sched::SchedulerStats& stats) {
  metrics::CoordinatorMetrics& metrics = *state_.metrics;
  metrics.SetQueueDepth(stats.pending);
  metrics.SetWorkers(stats.workers_alive, stats.workers_stale);
  metrics.SetSlots(stats.slots_busy, stats.slots_free);
  absl::StatusOr<std::map<std::string, int64_t>> counts = state_.store->CountTrials(0);
  if (counts.ok()) metrics.SetTrialCounts(*counts);
  const auto jobs = state_.store->CountEvalJobs();
  if (jobs.ok()) metrics.SetEvalJobCounts(*jobs);
}

}  // namespace spheret
