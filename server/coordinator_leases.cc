// The coordinator's lease keeping: workers registering and heartbeating, granting leases (with
// an evaluation job's work), the housekeeping pass (lease expiry, gauges, the liveness mark) and
// what a decision does after a stall of the coordinator itself.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/coordinator.h"

namespace spheret {
namespace {

// What one worker may declare: every scheduling pass walks its slots.
constexpr int kMaxCpuSlots = 4096;
constexpr size_t kMaxGpus = 64;

}  // namespace

absl::StatusOr<std::vector<sched::AttemptId>> Coordinator::Register(
    const WorkerRecord& worker, const std::vector<sched::AttemptId>& running,
    const std::vector<sched::AttemptId>& finished) {
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
  std::vector<sched::AttemptId> reattached;
  SPHERET_RETURN_IF_ERROR(Decide([&](int64_t now, Changes* changes) -> absl::Status {
    SPHERET_ASSIGN_OR_RETURN(reattached,
                             scheduler_.Register(worker, running, now, changes, finished));
    TrackRevivedLocked(*changes);
    return absl::OkStatus();
  }));
  return reattached;
}

absl::StatusOr<sched::HeartbeatResult> Coordinator::Heartbeat(
    const std::string& worker_id, const std::string& instance,
    const std::vector<sched::AttemptId>& running, const std::vector<sched::AttemptId>& finished) {
  sched::HeartbeatResult result;
  SPHERET_RETURN_IF_ERROR(Decide([&](int64_t now, Changes* changes) {
    result = scheduler_.Heartbeat(worker_id, instance, running, now, changes, finished);
    TrackRevivedLocked(*changes);
    return absl::OkStatus();
  }));
  return result;
}

void Coordinator::TrackRevivedLocked(const Changes& changes) {
  for (const TrialRecord& trial : changes.trials) {
    const SweepRecord* sweep = scheduler_.FindSweep(trial.sweep_id);
    if (trial.state != TrialState::kRunning || live_.count(trial.trial_id) != 0 ||
        sweep == nullptr) {
      continue;
    }
    spdlog::info(
        "trial {} attempt {}: its worker came back with it after its lease lapsed; "
        "revived (no failure charged for the lapse)",
        trial.trial_id, trial.attempt);
    TrackRunningLocked(trial, sweep->name);
  }
}

absl::StatusOr<std::vector<Lease>> Coordinator::Acquire(const std::string& worker_id,
                                                        const std::string& instance, int free_slots,
                                                        int rendezvous_port, int max_trials,
                                                        const Interrupt& gone) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Lease> grants;
  SPHERET_RETURN_IF_ERROR(Decide([&](int64_t now, Changes* changes) -> absl::Status {
    if (gone) SPHERET_RETURN_IF_ERROR(gone());  // it waited past its deadline for the lock
    if (now < grants_from_ms_) {
      return absl::UnavailableError(
          absl::StrCat("the coordinator is resuming after a stall; it grants leases again in ",
                       grants_from_ms_ - now, " ms"));
    }
    SPHERET_ASSIGN_OR_RETURN(std::vector<LeaseRecord> leases,
                             scheduler_.Acquire(worker_id, instance, free_slots, rendezvous_port,
                                                max_trials, now, changes));
    for (const LeaseRecord& lease : leases) {
      const TrialRecord* trial = scheduler_.FindTrial(lease.trial_id);
      const SweepRecord* sweep = scheduler_.FindSweep(trial->sweep_id);
      grants.push_back({lease, trial->config_json, trial->sweep_id, EvalWorkOf(*trial)});
      if (live_.count(trial->trial_id) == 0) TrackRunningLocked(*trial, sweep->name);
    }
    return absl::OkStatus();
  }));
  metrics_->ObserveScheduleLatency(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // The commit may have waited (a slow disk, a busy database) past the caller's deadline: an
  // answer now reaches no one, and its leases would expire as failures.
  if (absl::Status late = gone ? gone() : absl::OkStatus(); !late.ok() && !grants.empty()) {
    HandBack(grants, worker_id, late);
    return late;
  }
  return grants;
}

void Coordinator::HandBack(const std::vector<Lease>& grants, const std::string& worker_id,
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

void Coordinator::NoticeStallLocked(int64_t now, Changes* changes) {
  const int64_t since = last_decision_ms_;
  last_decision_ms_ = std::max(last_decision_ms_, now);
  const int64_t interval = options_.housekeeping_interval_ms;
  const int64_t stall_ms =
      options_.stall_ms > 0
          ? options_.stall_ms
          : std::max(2 * interval, std::min(4 * interval, options_.scheduler.lease_ttl_ms / 3));
  if (since == 0 || now - since <= stall_ms) return;
  const int renewed = scheduler_.RenewAfterStall(since, now, changes);
  grants_from_ms_ = now + stall_ms;
  spdlog::warn(
      "the coordinator stalled: no decision for {} ms (more than {} ms); {} lease(s) of workers "
      "alive before it get a fresh TTL of {} ms instead of expiring; Acquire grants nothing for "
      "{} ms",
      now - since, stall_ms, renewed, options_.scheduler.lease_ttl_ms, stall_ms);
  metrics_->AddStall(static_cast<double>(now - since) / 1000.0);
}

void Coordinator::Housekeeping() {
  sched::SchedulerStats stats;
  int expired = 0;
  absl::Status committed = Decide([&](int64_t now, Changes* changes) {
    expired = scheduler_.ExpireLeases(now, changes);
    stats = scheduler_.Stats(now);
    return absl::OkStatus();
  });
  if (committed.ok()) {
    committed = store_->SetLastAlive(clock_->NowMs());
    // Said once per outage: a restart before it ends extends leases from the last mark.
    if (!committed.ok() && !liveness_failing_) {
      spdlog::warn("cannot record the liveness mark: {}", std::string(committed.message()));
    }
    liveness_failing_ = !committed.ok();
  }
  metrics_->AddLeaseExpirations(committed.ok() ? expired : 0);
  metrics_->SetQueueDepth(stats.pending);
  metrics_->SetWorkers(stats.workers_alive, stats.workers_stale);
  metrics_->SetSlots(stats.slots_busy, stats.slots_free);
  absl::StatusOr<std::map<std::string, int64_t>> counts = store_->CountTrials(0);
  if (counts.ok()) metrics_->SetTrialCounts(*counts);
  const auto jobs = store_->CountEvalJobs();
  if (jobs.ok()) metrics_->SetEvalJobCounts(*jobs);
  ConfirmDue();
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
