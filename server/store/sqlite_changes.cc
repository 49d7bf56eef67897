// WriteChanges: one scheduler decision, table by table, inside the caller's transaction.
#include <algorithm>
#include <cfloat>
#include <nlohmann/json.hpp>

#include "base/status_macros.h"
#include "server/store/sqlite_rows.h"

namespace spheret::store {
namespace {

using nlohmann::json;

std::string IntsJson(const std::vector<int>& values) { return json(values).dump(); }

// Trials: state, attempt, cancel flag, back-off, error; ended_ms for an ended one.
absl::Status WriteTrials(Database& db, const Changes& changes, int64_t now_ms) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * trial,
      db.Prepare("UPDATE trials SET state = ?2, attempt = ?3, cancel_requested = ?4, "
                 "not_before_ms = ?5, error = ?6, ended_ms = CASE WHEN ?2 IN ('PENDING', "
                 "'RUNNING') THEN NULL ELSE ?7 END, failures = ?8, rung = ?9, prune_requested = ?10, "
                 "prune_exempt = ?11 WHERE trial_id = ?1"));
  for (const TrialRecord& t : changes.trials) {
    trial->Bind(1, t.trial_id).Bind(2, TrialStateName(t.state)).Bind(3, t.attempt);
    trial->Bind(4, static_cast<int64_t>(t.cancel_requested)).Bind(5, t.not_before_ms);
    trial->Bind(6, t.error).Bind(7, now_ms).Bind(8, t.failures).Bind(9, t.rung);
    trial->Bind(10, static_cast<int64_t>(t.prune_requested));
    trial->Bind(11, static_cast<int64_t>(t.prune_exempt));
    SPHERET_RETURN_IF_ERROR(trial->Run());
  }
  return absl::OkStatus();
}

// ASHA's judgements (a retried batch judges nothing twice: the first verdict stays).
absl::Status PutRungValues(Database& db, const Changes& changes) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * put,
      db.Prepare("INSERT OR IGNORE INTO rung_values(trial_id, rung, sweep_id, search_group, step, "
                 "value, promoted) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  for (const RungValue& r : changes.rung_values) {
    put->Bind(1, r.trial_id).Bind(2, r.rung).Bind(3, r.sweep_id).Bind(4, r.search_group);
    // SQLite stores infinities as NULL: a diverged value ranks as the largest or smallest double.
    const double value = std::clamp(r.value, -DBL_MAX, DBL_MAX);
    put->Bind(5, r.step).Bind(6, value).Bind(7, static_cast<int64_t>(r.promoted));
    SPHERET_RETURN_IF_ERROR(put->Run());
  }
  return absl::OkStatus();
}

// Leases that end.
absl::Status DropLeases(Database& db, const Changes& changes) {
  SPHERET_ASSIGN_OR_RETURN(Statement * drop, db.Prepare("DELETE FROM leases WHERE trial_id = ?1"));
  for (int64_t trial_id : changes.leases_dropped) {
    SPHERET_RETURN_IF_ERROR(drop->Bind(1, trial_id).Run());
  }
  return absl::OkStatus();
}

// Leases granted or renewed (not those that also end in this decision).
absl::Status PutLeases(Database& db, const Changes& changes) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * lease,
      db.Prepare("INSERT OR REPLACE INTO leases(trial_id, node_rank, attempt, worker_id, "
                 "slots_json, expires_ms, delivered, master_addr, master_port, nodes, "
                 "slots_per_node, ranks_per_node) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                 "?11, ?12)"));
  for (const LeaseRecord& l : changes.leases_put) {
    if (std::find(changes.leases_dropped.begin(), changes.leases_dropped.end(), l.trial_id) !=
        changes.leases_dropped.end()) {
      continue;  // renewed, then ended in the same decision
    }
    lease->Bind(1, l.trial_id).Bind(2, l.node_rank).Bind(3, l.attempt).Bind(4, l.worker_id);
    lease->Bind(5, IntsJson(l.slots)).Bind(6, l.expires_ms);
    lease->Bind(7, static_cast<int64_t>(l.delivered)).Bind(8, l.rendezvous.master_addr);
    lease->Bind(9, l.rendezvous.master_port).Bind(10, l.rendezvous.nodes);
    lease->Bind(11, l.rendezvous.slots_per_node).Bind(12, l.rendezvous.ranks_per_node);
    SPHERET_RETURN_IF_ERROR(lease->Run());
  }
  return absl::OkStatus();
}

// Attempts that start.
absl::Status StartAttempts(Database& db, const Changes& changes) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * started,
      db.Prepare("INSERT OR REPLACE INTO attempts(trial_id, attempt, worker_id, started_ms) "
                 "VALUES (?1, ?2, ?3, ?4)"));
  for (const AttemptStart& a : changes.attempts_started) {
    started->Bind(1, a.trial_id).Bind(2, a.attempt).Bind(3, a.worker_id).Bind(4, a.started_ms);
    SPHERET_RETURN_IF_ERROR(started->Run());
  }
  return absl::OkStatus();
}

// Attempts that end, with their outcome.
absl::Status EndAttempts(Database& db, const Changes& changes) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * ended,
      db.Prepare("UPDATE attempts SET ended_ms = ?3, outcome = ?4, exit_code = ?5, "
                 "stderr_tail = ?6 WHERE trial_id = ?1 AND attempt = ?2"));
  for (const AttemptEnd& a : changes.attempts_ended) {
    ended->Bind(1, a.trial_id).Bind(2, a.attempt).Bind(3, a.ended_ms);
    ended->Bind(4, TrialStateName(a.outcome)).Bind(5, a.exit_code).Bind(6, a.stderr_tail);
    SPHERET_RETURN_IF_ERROR(ended->Run());
  }
  return absl::OkStatus();
}

// Sweep states.
absl::Status WriteSweeps(Database& db, const Changes& changes) {
  SPHERET_ASSIGN_OR_RETURN(Statement * sweep,
                           db.Prepare("UPDATE sweeps SET state = ?2 WHERE sweep_id = ?1"));
  for (const auto& [sweep_id, state] : changes.sweeps) {
    SPHERET_RETURN_IF_ERROR(sweep->Bind(1, sweep_id).Bind(2, SweepStateName(state)).Run());
  }
  return absl::OkStatus();
}

// Workers registered or seen.
absl::Status WriteWorkers(Database& db, const Changes& changes) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * worker,
      db.Prepare("INSERT INTO workers(worker_id, host, gpus_json, gpu_names, cpu_slots, version, "
                 "registered_ms, last_seen_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                 "ON CONFLICT(worker_id) DO UPDATE SET host = excluded.host, gpus_json = "
                 "excluded.gpus_json, gpu_names = excluded.gpu_names, cpu_slots = "
                 "excluded.cpu_slots, version = excluded.version, last_seen_ms = "
                 "excluded.last_seen_ms"));
  for (const WorkerRecord& w : changes.workers) {
    worker->Bind(1, w.worker_id).Bind(2, w.host).Bind(3, IntsJson(w.gpus));
    worker->Bind(4, json(w.gpu_names).dump()).Bind(5, w.cpu_slots).Bind(6, w.version);
    worker->Bind(7, w.registered_ms).Bind(8, w.last_seen_ms);
    SPHERET_RETURN_IF_ERROR(worker->Run());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteChanges(Database& db, const Changes& changes, int64_t now_ms) {
  SPHERET_RETURN_IF_ERROR(WriteTrials(db, changes, now_ms));
  SPHERET_RETURN_IF_ERROR(DropLeases(db, changes));
  SPHERET_RETURN_IF_ERROR(PutLeases(db, changes));
  SPHERET_RETURN_IF_ERROR(StartAttempts(db, changes));
  SPHERET_RETURN_IF_ERROR(EndAttempts(db, changes));
  SPHERET_RETURN_IF_ERROR(WriteSweeps(db, changes));
  SPHERET_RETURN_IF_ERROR(WriteWorkers(db, changes));
  SPHERET_RETURN_IF_ERROR(PutRungValues(db, changes));
  return absl::OkStatus();
}

}  // namespace spheret::store
