// The scheduler's lapsed attempts: an attempt whose lease expired or was lost stays claimable by
// its worker until a newer attempt of its trial is granted (scheduler.h), so that an outcome
// delivered late (the worker's spool replayed it after the coordinator, or the network, was away)
// is accepted instead of being refused as stale. Also the leases that expire (and so lapse), and
// those a stall of the coordinator renews instead.
#include <algorithm>

#include "server/sched/scheduler.h"

namespace spheret::sched {

void Scheduler::Lapse(int64_t trial_id, const std::string& error, int64_t now_ms,
                      Changes* changes) {
  TrialRecord& trial = trials_.at(trial_id);
  const int failures = trial.failures;
  std::optional<LeaseRecord> lease;
  if (auto found = leases_.find(trial_id); found != leases_.end() && found->second.size() == 1) {
    lease = found->second.front();  // a gang's attempt is not kept: its members are many
  }
  EndAttempt(trial, TrialState::kFailed, -1, error, now_ms, changes);  // `trial` may dangle
  const TrialRecord& after = changes->trials.back();
  if (!lease || (after.state != TrialState::kPending && after.state != TrialState::kFailed)) {
    return;  // cancelled or pruned meanwhile: nothing to come back to
  }
  LapsedAttempt& lapsed = lapsed_[trial_id];
  lapsed = {lease->attempt,    lease->worker_id,          lease->slots,
            lease->rendezvous, after.failures > failures, std::nullopt};
  if (after.state == TrialState::kFailed) lapsed.failed = after;
}

const TrialRecord* Scheduler::LapsedTrial(int64_t trial_id, int attempt,
                                          const std::string& worker_id) const {
  auto lapsed = lapsed_.find(trial_id);
  if (lapsed == lapsed_.end() || lapsed->second.attempt != attempt ||
      (!worker_id.empty() && lapsed->second.worker_id != worker_id)) {
    return nullptr;
  }
  if (lapsed->second.failed) return &*lapsed->second.failed;
  const TrialRecord* trial = FindTrial(trial_id);
  return trial != nullptr && trial->state == TrialState::kPending ? trial : nullptr;
}

TrialRecord* Scheduler::Revivable(int64_t trial_id, const LapsedAttempt& lapsed, Changes* changes) {
  if (auto live = trials_.find(trial_id); live != trials_.end()) {
    TrialRecord& trial = live->second;
    if (trial.state != TrialState::kPending || trial.attempt != lapsed.attempt) return nullptr;
    sweeps_.at(trial.sweep_id).pending.erase(trial_id);
    return &trial;
  }
  // Its lapse ended it FAILED (no restart left): it lives again, and so does its sweep.
  if (!lapsed.failed) return nullptr;
  auto sweep = sweeps_.find(lapsed.failed->sweep_id);
  if (sweep == sweeps_.end() || sweep->second.record.state == SweepState::kCancelled) {
    return nullptr;
  }
  ++sweep->second.live;
  if (sweep->second.record.state == SweepState::kDone) {
    sweep->second.record.state = SweepState::kActive;
    changes->sweeps.emplace_back(sweep->first, SweepState::kActive);
  }
  return &(trials_[trial_id] = *lapsed.failed);
}

void Scheduler::Reclaim(WorkerEntry& worker, const std::vector<AttemptId>& listed,
                        const std::set<AttemptId>& finished, int64_t now_ms, Changes* changes,
                        std::vector<AttemptId>* reattached) {
  for (const AttemptId& id : listed) {
    auto found = lapsed_.find(id.first);
    if (found == lapsed_.end() || leases_.count(id.first) != 0) continue;
    const LapsedAttempt lapsed = found->second;
    if (lapsed.attempt != id.second || lapsed.worker_id != worker.record.worker_id) continue;
    const bool slots_free = std::none_of(lapsed.slots.begin(), lapsed.slots.end(),
                                         [&](int slot) { return worker.busy.count(slot) != 0; });
    const bool done = finished.count(id) != 0;
    if (!slots_free && !done) continue;  // a running attempt needs its slots back
    TrialRecord* trial = Revivable(id.first, lapsed, changes);
    if (trial == nullptr) continue;
    lapsed_.erase(found);
    trial->state = TrialState::kRunning;
    if (lapsed.charged) --trial->failures;
    trial->error.clear();
    changes->trials.push_back(*trial);
    LeaseRecord lease{
        id.first, id.second,        worker.record.worker_id, 0, {}, now_ms + options_.lease_ttl_ms,
        true,     lapsed.rendezvous};
    if (!done) lease.slots = lapsed.slots;  // a finished attempt holds no slot any more
    worker.busy.insert(lease.slots.begin(), lease.slots.end());
    leases_[id.first] = {lease};
    changes->leases_put.push_back(lease);
    if (!done) reattached->push_back(id);
  }
}

int Scheduler::RenewAfterStall(int64_t stall_start_ms, int64_t now_ms, Changes* changes) {
  int renewed = 0;
  for (auto& [trial_id, members] : leases_) {
    for (LeaseRecord& lease : members) {
      auto worker = workers_.find(lease.worker_id);
      if (worker == workers_.end() || !Alive(worker->second, stall_start_ms)) continue;
      lease.expires_ms = std::max(lease.expires_ms, now_ms + options_.lease_ttl_ms);
      changes->leases_put.push_back(lease);
      ++renewed;
    }
  }
  return renewed;
}

int Scheduler::ExpireLeases(int64_t now_ms, Changes* changes) {
  std::vector<int64_t> expired;
  for (const auto& [trial_id, members] : leases_) {
    if (std::any_of(members.begin(), members.end(),
                    [&](const LeaseRecord& l) { return l.expires_ms < now_ms; })) {
      expired.push_back(trial_id);
    }
  }
  for (int64_t trial_id : expired) Lapse(trial_id, "lease expired", now_ms, changes);
  return static_cast<int>(expired.size());
}

}  // namespace spheret::sched
