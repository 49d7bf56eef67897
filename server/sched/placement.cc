// The scheduler's placement: which sweep's trial goes to which worker (or gang) at Acquire.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/sched/scheduler.h"

namespace spheret::sched {

std::vector<int64_t> Scheduler::SweepsByScore(int64_t now_ms) const {
  std::vector<std::pair<double, int64_t>> scored;
  for (const auto& [id, sweep] : sweeps_) {
    if (sweep.pending.empty() || sweep.record.state != SweepState::kActive) continue;
    const int64_t waiting_since = std::max(sweep.last_placed_ms, sweep.record.submitted_ms);
    const double aging = static_cast<double>(now_ms - waiting_since) /
                         static_cast<double>(std::max<int64_t>(options_.aging_ms_per_point, 1));
    scored.emplace_back(-(sweep.record.priority + std::max(aging, 0.0)), id);
  }
  std::sort(scored.begin(), scored.end());  // best score first, then the older sweep
  std::vector<int64_t> ids;
  for (const auto& entry : scored) ids.push_back(entry.second);
  return ids;
}

std::vector<Scheduler::WorkerEntry*> Scheduler::GangMembers(const SweepEntry& sweep,
                                                            const WorkerEntry& rank0,
                                                            int64_t now_ms) {
  std::vector<WorkerEntry*> candidates;
  for (auto& [id, worker] : workers_) {
    const int free = worker.Free();
    if (&worker == &rank0 || worker.gpu() != (sweep.record.gpus > 0) || !Alive(worker, now_ms) ||
        free < sweep.record.slots_per_node) {
      continue;
    }
    candidates.push_back(&worker);
  }
  if (static_cast<int>(candidates.size()) < sweep.record.nodes - 1) return {};
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](WorkerEntry* a, WorkerEntry* b) { return a->Free() > b->Free(); });
  candidates.resize(sweep.record.nodes - 1);
  return candidates;
}

int Scheduler::PlaceTrial(SweepEntry& sweep, WorkerEntry& worker, int free, int rendezvous_port,
                          int64_t now_ms, std::vector<LeaseRecord>* granted, Changes* changes) {
  // The first pending trial that fits, in submit order. The sweep's training trials share one
  // shape: once one does not fit, none does. An evaluation job scores one checkpoint in one
  // process, one slot of one node, so it may pass a training trial that waits for its gang.
  std::vector<WorkerEntry*> members = {&worker};
  bool training_fits = sweep.record.slots_per_node <= free;
  if (training_fits && sweep.record.nodes > 1) {
    std::vector<WorkerEntry*> others = GangMembers(sweep, worker, now_ms);
    training_fits = !others.empty();
    members.insert(members.end(), others.begin(), others.end());
  }
  auto next = std::find_if(sweep.pending.begin(), sweep.pending.end(), [&](int64_t id) {
    const TrialRecord& pending = trials_.at(id);
    return pending.not_before_ms <= now_ms && (pending.eval_of > 0 ? free >= 1 : training_fits);
  });
  if (next == sweep.pending.end()) return 0;
  const bool eval = trials_.at(*next).eval_of > 0;
  const int slots = eval ? 1 : sweep.record.slots_per_node;
  if (eval) members.resize(1);
  TrialRecord& trial = trials_.at(*next);
  sweep.pending.erase(next);
  trial.state = TrialState::kRunning;
  trial.attempt += 1;
  lapsed_.erase(trial.trial_id);  // a newer attempt: the lapsed one's outcome no longer counts
  changes->trials.push_back(trial);
  changes->attempts_started.push_back(
      {trial.trial_id, trial.attempt, worker.record.worker_id, now_ms});
  const Rendezvous rendezvous{worker.record.host, rendezvous_port, eval ? 1 : sweep.record.nodes,
                              slots, eval ? 1 : std::max(sweep.record.gpus, 1)};
  GrantLeases(trial, members, slots, rendezvous, now_ms, granted, changes);
  sweep.last_placed_ms = now_ms;
  return slots;
}

void Scheduler::GrantLeases(const TrialRecord& trial, const std::vector<WorkerEntry*>& members,
                            int slots, const Rendezvous& rendezvous, int64_t now_ms,
                            std::vector<LeaseRecord>* granted, Changes* changes) {
  std::vector<LeaseRecord>& leases = leases_[trial.trial_id];
  for (size_t rank = 0; rank < members.size(); ++rank) {
    LeaseRecord lease{trial.trial_id,
                      trial.attempt,
                      members[rank]->record.worker_id,
                      static_cast<int>(rank),
                      {},
                      now_ms + options_.lease_ttl_ms,
                      rank == 0,
                      rendezvous};
    for (int slot : members[rank]->Slots()) {
      if (static_cast<int>(lease.slots.size()) == slots) break;
      if (members[rank]->busy.insert(slot).second) lease.slots.push_back(slot);
    }
    leases.push_back(lease);
    changes->leases_put.push_back(lease);
    if (rank == 0) granted->push_back(lease);
  }
}

absl::StatusOr<std::vector<LeaseRecord>> Scheduler::Acquire(const std::string& worker_id,
                                                            const std::string& instance,
                                                            int free_slots, int rendezvous_port,
                                                            int max_trials, int64_t now_ms,
                                                            Changes* changes) {
  auto found = workers_.find(worker_id);
  if (found == workers_.end() || !SameDaemon(found->second, instance)) {
    return absl::NotFoundError("worker '" + worker_id + "' is not registered" +
                               (found == workers_.end() ? "" : " by this daemon") +
                               "; Register first");
  }
  WorkerEntry& worker = found->second;
  worker.record.last_seen_ms = now_ms;
  std::vector<LeaseRecord> granted;
  for (auto& [trial_id, members] : leases_) {  // gang parts placed by another worker's Acquire
    for (LeaseRecord& lease : members) {
      if (lease.worker_id != worker_id || lease.delivered) continue;
      lease.delivered = true;
      lease.expires_ms = now_ms + options_.lease_ttl_ms;
      changes->leases_put.push_back(lease);
      granted.push_back(lease);
    }
  }
  int free = std::min(free_slots, worker.Free());
  max_trials = std::max(max_trials, 1);
  bool placed = true;
  while (placed && static_cast<int>(granted.size()) < max_trials) {
    placed = false;
    for (int64_t sweep_id : SweepsByScore(now_ms)) {
      SweepEntry& sweep = sweeps_.at(sweep_id);
      if ((sweep.record.gpus > 0) != worker.gpu()) continue;
      if (const int used =
              PlaceTrial(sweep, worker, free, rendezvous_port, now_ms, &granted, changes);
          used > 0) {
        free -= used;
        placed = true;
        break;
      }
    }
  }
  return granted;
}

}  // namespace spheret::sched
