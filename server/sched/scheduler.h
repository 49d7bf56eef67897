// The scheduling policy and the lease state machine, in memory and pure: no RPC, no SQL, no
// clock of its own (every call takes `now_ms`), not thread-safe (the coordinator holds one lock).
//
// Order: sweeps compete by priority plus aging (a sweep gains one point per `aging_ms_per_point`
// since it last got a slot, so a big sweep cannot starve a small one); within a sweep, trials go
// in submit order. Placement is all-or-nothing: a trial takes `slots_per_node` free slots on each
// of `nodes` workers of its kind (GPU or CPU), the asking worker being rank 0 of a gang; the other
// members receive their part on their next Acquire. An evaluation job (eval_of > 0) takes one
// slot of one worker.
//
// Leases last `lease_ttl_ms` and are renewed by heartbeats. A lease that expires, or a FAILED
// attempt, makes the trial PENDING again after a back-off, until its failures pass max_restarts
// (FAILED); a hand-back (worker shutting down, pre-emption) is leased again at once and is not a
// failure.
//
// A lapsed attempt (its single-node lease expired, or was lost at a Register that did not list
// it) stays claimable by the worker that held it until a newer attempt of the trial is granted
// (or the trial is cancelled or pruned, or this scheduler is rebuilt): when that worker lists it
// again, as running or as finished with its Finish still to deliver (Register, Heartbeat), the
// attempt is revived: the trial is RUNNING in that attempt again under a fresh lease, and the
// failure its lapse charged is taken back. So an outcome the coordinator missed while it (or the
// network) was away is accepted as long as no newer attempt has started.
// Every decision fills a `Changes`, which the caller commits before it answers anyone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/domain/records.h"

namespace spheret::sched {

struct SchedulerOptions {
  int64_t lease_ttl_ms = 30'000;        // a lease not renewed for this long expires
  int64_t aging_ms_per_point = 60'000;  // waiting this long is worth one priority point
  int64_t backoff_base_ms = 5'000;      // attempt n waits base * 2^(n-1) before its retry...
  int64_t backoff_max_ms = 300'000;     // ...at most this long
};

// (trial_id, attempt) of a trial a worker runs.
using AttemptId = std::pair<int64_t, int>;

struct HeartbeatResult {
  bool known = true;            // false: the worker must Register again
  std::vector<AttemptId> stop;  // cancelled or no longer this worker's
};

struct CancelResult {
  int64_t cancelled_pending = 0;
  int64_t stopping_running = 0;
};

struct SchedulerStats {
  int64_t pending = 0, running = 0;
  int64_t workers_alive = 0, workers_stale = 0;
  int64_t slots_busy = 0, slots_free = 0;  // of alive workers
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options) : options_(options) {}

  // Loading: sweeps before their trials; leases and workers when restoring from the store.
  void AddSweep(const SweepRecord& sweep);
  void AddTrial(const TrialRecord& trial);  // terminal trials are ignored
  void RestoreWorker(const WorkerRecord& worker);
  void RestoreLease(const LeaseRecord& lease);
  // After a restore: push every lease's expiry by `downtime_ms` (the coordinator was away, so the
  // workers could not renew), to no less than one TTL from now, and requeue RUNNING trials that
  // have no lease.
  void FinishRestore(int64_t downtime_ms, int64_t now_ms, Changes* changes);

  // Registers (or re-registers) a worker; returns the trials of `running` it may keep (revived
  // lapsed ones among them). `finished`: attempts that ended on the worker whose Finish it still
  // has to deliver (its spool): their leases are renewed (a lapsed one revived), not ended. Leases
  // the worker id holds and lists in neither end at once as failed (a restarted daemon lost
  // them). AlreadyExists when another daemon (another non-empty `instance`) with this id was
  // heard from within the lease TTL.
  absl::StatusOr<std::vector<AttemptId>> Register(const WorkerRecord& worker,
                                                  const std::vector<AttemptId>& running,
                                                  int64_t now_ms, Changes* changes,
                                                  const std::vector<AttemptId>& finished = {});
  // Renews the leases of `running` and `finished` (as in Register), and gang parts not yet
  // delivered, only: a lease the worker does not list runs out within the TTL. Lapsed attempts
  // it lists are revived. A heartbeat from a daemon that another instance has replaced is told to
  // stop everything and register again.
  HeartbeatResult Heartbeat(const std::string& worker_id, const std::string& instance,
                            const std::vector<AttemptId>& running, int64_t now_ms, Changes* changes,
                            const std::vector<AttemptId>& finished = {});
  // New leases for the worker: gang parts waiting for it first, then the best trials that fit.
  // NotFound when the worker is not registered.
  // NotFound also when `instance` is not the registered daemon's.
  absl::StatusOr<std::vector<LeaseRecord>> Acquire(const std::string& worker_id,
                                                   const std::string& instance, int free_slots,
                                                   int rendezvous_port, int max_trials,
                                                   int64_t now_ms, Changes* changes);
  // OK when (trial_id, attempt) is the trial's live attempt; FailedPrecondition otherwise.
  absl::Status CheckFence(int64_t trial_id, int attempt) const;
  // CheckFence, and that `worker_id` (unless "") holds one of the attempt's leases.
  absl::Status CheckHolder(int64_t trial_id, int attempt, const std::string& worker_id) const;
  // The trial of a lapsed attempt that `worker_id` (unless "") held and may still claim (its
  // events are stored, not exported), or null.
  const TrialRecord* LapsedTrial(int64_t trial_id, int attempt, const std::string& worker_id) const;
  // Ends an attempt reported by `worker_id`; returns the trial's new state. Outcome PENDING hands
  // the trial back (no back-off, never FAILED). The Finish of a lapsed attempt from the worker
  // that held it revives it first (its outcome counts: no newer attempt has started).
  absl::StatusOr<TrialState> Finish(const AttemptEnd& end, const std::string& worker_id,
                                    Changes* changes);
  // After a stall of the coordinator (no decision from `stall_start_ms` to `now_ms`: it was
  // paused, so no worker could renew): gives every lease whose worker was heard from within one
  // TTL before the stall a fresh TTL from `now_ms`; returns how many. Workers keep their
  // last_seen, so a worker silent since before the stall is not kept alive by stalls that repeat.
  // Fills changes->leases_put only.
  int RenewAfterStall(int64_t stall_start_ms, int64_t now_ms, Changes* changes);
  // Ends every attempt with an expired lease; returns how many expired.
  int ExpireLeases(int64_t now_ms, Changes* changes);
  // Cancels a sweep's live trials (NotFound for an unknown sweep) and marks it cancelled.
  absl::StatusOr<CancelResult> CancelSweep(int64_t sweep_id, Changes* changes);
  // Cancels a pending trial, or asks a running one to stop; an ended or unknown trial has nothing
  // to cancel (an empty result).
  CancelResult CancelTrial(int64_t trial_id, Changes* changes);

  // A search's verdict on a live trial (server/sched/rungs.h): it has been judged at `rung` rungs;
  // `prune` stops it: a PENDING trial becomes PRUNED now, a RUNNING one is told to stop (on its
  // worker's next heartbeat) and becomes PRUNED when its attempt ends (SUCCEEDED if it finished
  // first). Nothing for an ended or unknown trial.
  void Judge(int64_t trial_id, int rung, bool prune, Changes* changes);

  // A PRUNED trial resumed by hand (`spheret resume`): PENDING again, exempt from its search's
  // verdicts from now on, reopening its sweep when that was DONE. FailedPrecondition for a trial
  // that is not PRUNED or whose sweep is cancelled.
  absl::Status Resume(TrialRecord trial, Changes* changes);

  // Marks an ACTIVE sweep with no live trial DONE (a search whose confirm trials were added, or
  // that has nothing to confirm: SetTerminal leaves such a sweep ACTIVE).
  void CloseIfIdle(int64_t sweep_id, Changes* changes);

  SchedulerStats Stats(int64_t now_ms) const;
  // The live (PENDING or RUNNING) trial, or null.
  const TrialRecord* FindTrial(int64_t trial_id) const;
  const std::vector<LeaseRecord>* FindLeases(int64_t trial_id) const;
  const SweepRecord* FindSweep(int64_t sweep_id) const;

 private:
  struct SweepEntry {
    SweepRecord record;
    int64_t last_placed_ms = 0;
    std::set<int64_t> pending;  // trial ids in submit order
    int64_t live = 0;           // PENDING + RUNNING trials
  };
  struct WorkerEntry {
    WorkerRecord record;
    std::set<int> busy;  // slot indices held by leases
    std::vector<int> Slots() const;
    // Slots not held by a lease (never negative: a worker may re-register with fewer).
    int Free() const {
      return std::max(0, static_cast<int>(Slots().size()) - static_cast<int>(busy.size()));
    }
    bool gpu() const { return !record.gpus.empty(); }
  };

  // An attempt whose lease lapsed (scheduler.h's header comment), claimable by its worker.
  struct LapsedAttempt {
    int attempt = 0;
    std::string worker_id;
    std::vector<int> slots;
    Rendezvous rendezvous;
    bool charged = false;               // the lapse counted a failure
    std::optional<TrialRecord> failed;  // the trial, when the lapse ended it FAILED
  };

  // Ends the attempt of a live trial whose lease lapsed (FAILED with `error`) and, for a
  // single-node lease, keeps it claimable (reclaim.cc).
  void Lapse(int64_t trial_id, const std::string& error, int64_t now_ms, Changes* changes);
  // Revives the lapsed attempts of `worker` among `listed` (those of `finished` need no slot);
  // adds the running ones to *reattached (reclaim.cc).
  void Reclaim(WorkerEntry& worker, const std::vector<AttemptId>& listed,
               const std::set<AttemptId>& finished, int64_t now_ms, Changes* changes,
               std::vector<AttemptId>* reattached);
  // The trial a lapsed attempt revives into (live again, its sweep reopened), or null when it
  // may not be revived.
  TrialRecord* Revivable(int64_t trial_id, const LapsedAttempt& lapsed, Changes* changes);
  std::vector<int64_t> SweepsByScore(int64_t now_ms) const;
  // Leases the sweep's next pending trial with `worker` as rank 0 when it fits in `free` of its
  // slots (and a gang's other nodes are free); returns the slots it took on `worker`, 0 for none.
  int PlaceTrial(SweepEntry& sweep, WorkerEntry& worker, int free, int rendezvous_port,
                 int64_t now_ms, std::vector<LeaseRecord>* granted, Changes* changes);
  // Leases `trial`'s new attempt to `members` (rank 0 first), `slots` slots on each, meeting at
  // `rendezvous`; rank 0's lease goes to *granted, the others' wait for their workers' Acquire.
  void GrantLeases(const TrialRecord& trial, const std::vector<WorkerEntry*>& members, int slots,
                   const Rendezvous& rendezvous, int64_t now_ms, std::vector<LeaseRecord>* granted,
                   Changes* changes);
  std::vector<WorkerEntry*> GangMembers(const SweepEntry& sweep, const WorkerEntry& rank0,
                                        int64_t now_ms);
  void EndAttempt(TrialRecord& trial, TrialState outcome, int exit_code, std::string error,
                  int64_t now_ms, Changes* changes);
  void DropLeases(int64_t trial_id, Changes* changes);
  void SetTerminal(TrialRecord& trial, TrialState state, Changes* changes);
  bool Alive(const WorkerEntry& worker, int64_t now_ms) const;
  // Whether `instance` speaks for the registered daemon of `worker` ("" on either side: yes).
  static bool SameDaemon(const WorkerEntry& worker, const std::string& instance);

  SchedulerOptions options_;
  std::map<int64_t, SweepEntry> sweeps_;
  std::unordered_map<int64_t, TrialRecord> trials_;               // live trials only
  std::unordered_map<int64_t, std::vector<LeaseRecord>> leases_;  // by trial, one per node
  std::map<std::string, WorkerEntry> workers_;
  std::unordered_map<int64_t, LapsedAttempt> lapsed_;  // by trial
};

}  // namespace spheret::sched
