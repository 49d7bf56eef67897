// The coordinator's core: sweep submission, the scheduler behind one lock, the store, metrics and
// the lease-expiry loop. Speaks domain types and absl::Status; server/rpc maps gRPC onto it.
//
// Every decision is committed to the store before its call returns; a decision whose commit fails
// (a full disk, an I/O error) is undone in memory, with every decision queued after it, by
// reloading the scheduler from the store, so memory never runs ahead of the disk. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "server/domain/records.h"
#include "server/metrics/metrics.h"
#include "server/sched/rungs.h"
#include "server/sched/scheduler.h"
#include "server/store/store.h"
#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"
#include "server/sweep_watch.h"
#include "server/tokens.h"

namespace spheret {

struct CoordinatorOptions {
  sched::SchedulerOptions scheduler;
  SweepLimits limits;
  int64_t heartbeat_interval_ms = 5'000;   // told to workers at Register
  int64_t housekeeping_interval_ms = 500;  // lease expiry, gauges, liveness mark
  // A gap between two decisions (heartbeats, acquires, housekeeping passes) longer than this is
  // a stall of the coordinator itself (SIGSTOP, a paused VM, swapping): no worker could renew a
  // lease meanwhile, so the first decision after it renews them (Scheduler::RenewAfterStall)
  // before anything expires. 0: the lesser of 4 housekeeping intervals and a third of the lease
  // TTL, but at least 2 housekeeping intervals.
  int64_t stall_ms = 0;
};

struct SubmitResult {
  int64_t sweep_id = 0;  // 0 on a dry run
  int64_t trial_count = 0;
  int64_t created_trials = 0;
  std::vector<TrialSpec> trials;  // the expanded grid
  std::vector<std::string> notices;  // ExpandSweep's, for the submitter (e.g. coinciding draws)
};

// An evaluation job's work (TrialRecord::eval_of > 0): the checkpoint it scores and on what.
struct EvalWork {
  int64_t trial_id = 0;  // the trial it scores; 0: a training trial's lease
  int64_t step = 0;
  std::vector<std::string> tasks;
  std::string data;
};

// A lease with what the worker needs to start it.
struct Lease {
  LeaseRecord record;
  std::string config_json;
  int64_t sweep_id = 0;
  EvalWork eval;
};

// What `spheret eval` asks for: zero-shot scores of a sweep's finished trials.
struct EvalRequest {
  int64_t sweep_id = 0;
  std::vector<int64_t> trial_ids;  // empty: every training trial of the sweep
  std::vector<std::pair<std::string, std::string>> where;  // knob, value (as KnobText writes it)
  std::vector<std::string> tasks;
  std::string data;  // the tasks' folder; relative: under each worker's --data-root
  bool dry_run = false;
};

// What became of one trial of an EvalRequest: the tasks a new job scores, or why none.
struct EvalPlan {
  int64_t trial_id = 0;
  int64_t step = 0;                // its latest checkpoint's step (0: none recorded)
  std::vector<std::string> tasks;  // scored by a new job (empty: none needed or possible)
  int64_t job_id = 0;              // that job (0 on a dry run)
  std::string note;                // why no (further) job
};

// A sweep with its trials counted per state name.
struct SweepView {
  SweepRecord sweep;
  std::map<std::string, int64_t> counts;
};

// A trial's history: its attempts (oldest first).
struct TrialLogs {
  TrialView trial;
  std::vector<AttemptRecord> attempts;
};

// One trial's results: its metric summaries and zero-shot scores.
struct TrialResult {
  TrialView trial;
  std::vector<EvalRecord> evals;
};

class Coordinator {
 public:
  // Restores the scheduler from the store (extending live leases by the downtime since the last
  // liveness mark) and starts the housekeeping thread. `store`, `metrics` and `clock` must outlive
  // it.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(store::Store* store,
                                                            metrics::CoordinatorMetrics* metrics,
                                                            const Clock* clock,
                                                            CoordinatorOptions options);
  ~Coordinator();

  // The process is stopping (SIGTERM): long calls (a dry run's expansion) end at their next check
  // instead of holding up the RPC server's shutdown until gRPC cancels them.
  void BeginStop() { stop_requested_.store(true); }
  bool StopRequested() const { return stop_requested_.load(); }

  // Parses, validates and expands a sweep file (asking `interrupt`, when set, during the long
  // part) and, unless `dry_run`, stores it.
  // `files`: the connection files sent with it (server/sweep/connection_files.h).
  absl::StatusOr<SubmitResult> Submit(const std::string& spec_yaml,
                                      const std::string& idempotency_key, bool dry_run,
                                      const Interrupt& interrupt = nullptr,
                                      const ConnectionFiles& files = {});
  // Cancel decisions: NotFound for an unknown sweep; a trial that ended (or is unknown) cancels
  // nothing. Either fails only when its commit does (the decision is then undone).
  absl::StatusOr<sched::CancelResult> CancelSweep(int64_t sweep_id);
  absl::StatusOr<sched::CancelResult> CancelTrial(int64_t trial_id);
  // Schedules zero-shot evaluation jobs (coordinator_eval.cc): for each SUCCEEDED training trial
  // the request selects, one job scoring its latest checkpoint on the requested tasks that are
  // neither scored at that step nor covered by a live or finished job (a FAILED or CANCELLED
  // job's tasks are asked again). Jobs are trials of the sweep (reopening it), leased, retried
  // and stored like any; their eval events are stored against the trial they score. Submitting
  // the same request twice creates nothing the second time. InvalidArgument for unknown tasks,
  // knobs or trials; FailedPrecondition for a cancelled sweep. A job takes one slot of one worker
  // (sched::Scheduler), whatever its sweep's trials take.
  absl::StatusOr<std::vector<EvalPlan>> Evaluate(const EvalRequest& request);

  // Register and Heartbeat as in sched::Scheduler: `finished` lists the attempts that ended on
  // the worker whose Finish it still has to deliver (their leases are kept, lapsed ones revived).
  absl::StatusOr<std::vector<sched::AttemptId>> Register(
      const WorkerRecord& worker, const std::vector<sched::AttemptId>& running,
      const std::vector<sched::AttemptId>& finished = {});
  absl::StatusOr<sched::HeartbeatResult> Heartbeat(
      const std::string& worker_id, const std::string& instance,
      const std::vector<sched::AttemptId>& running,
      const std::vector<sched::AttemptId>& finished = {});
  // Unavailable for one stall threshold after a stall of the coordinator: the requests that
  // waited through it were mostly given up by their callers, and a lease whose answer is lost
  // would expire as a failure.
  // Resumes a PRUNED trial by hand (`spheret resume`, Scheduler::Resume): it is leased again,
  // continues from its checkpoint and is never stopped by its search again. NotFound for an
  // unknown trial, FailedPrecondition for one that is not PRUNED.
  absl::StatusOr<TrialRecord> Resume(int64_t trial_id);
  // Adds the confirm trials of each search group that has ended since the last call (and, the
  // first time, of every sweep: a restart finds what a crash left undone): the group's best
  // `confirm.top` settings among its SUCCEEDED search trials, by the search metric's last value,
  // once per confirm seed, as trials of the sweep (role "confirm"; exactly once: their keys are
  // fixed by their configs). Called by housekeeping and after each Finish.
  void ConfirmDue();

  // `gone` (when set) says whether the caller has given up (its deadline passed, it went away):
  // then nothing is granted, and leases granted while their commit waited are handed back (not a
  // failure) instead of being answered to no one and expiring as failures.
  absl::StatusOr<std::vector<Lease>> Acquire(const std::string& worker_id,
                                             const std::string& instance, int free_slots,
                                             int rendezvous_port, int max_trials,
                                             const Interrupt& gone = nullptr);
  // Stores one batch of an attempt's events and returns how many metric rows were new;
  // FailedPrecondition for a stale attempt, or when `worker_id` (unless "") holds no lease on it;
  // InvalidArgument, naming the field, for a diag row that breaks protocol/diag_values.h's rules
  // (nothing of the batch is stored). Diag rows beyond the depth of the trial's model
  // (DiagRowWithinDepth) are dropped, neither stored nor exported, and counted; when its config
  // does not resolve to a depth, they are stored and not exported. The trial's live gauges export
  // its per-layer values (CoordinatorMetrics::TrialLayerValues).
  absl::StatusOr<int64_t> Ingest(const EventBatchRecord& batch, const std::string& worker_id = "");
  absl::StatusOr<TrialState> Finish(const AttemptEnd& end, const std::string& worker_id);

  // A number that grows whenever a trial of `sweep_id` changes; WaitForChange blocks until it
  // passes `seen` or `timeout_ms` elapses, and returns it.
  int64_t WaitForChange(int64_t sweep_id, int64_t seen, int64_t timeout_ms);

  // Reads (from the store's last committed state; NotFound for an unknown sweep or trial).
  absl::StatusOr<SweepView> GetSweep(int64_t sweep_id);
  absl::StatusOr<std::vector<SweepView>> ListSweeps(int64_t after_sweep_id, int limit);
  absl::StatusOr<std::vector<TrialView>> ListTrials(const store::TrialQuery& query);
  // A trial and its attempts (NotFound for no such trial); its events come by TrialEvents.
  absl::StatusOr<TrialLogs> GetTrialLogs(int64_t trial_id);
  // One page of a trial's stored events (`query` says which).
  absl::StatusOr<EventPage> TrialEvents(int64_t trial_id, const EventPageQuery& query);
  // One page of the results of sweep query.sweep_id (> 0: InvalidArgument otherwise): its trials
  // after query.after_trial_id in id order, at most query.limit (query.states ignored).
  absl::StatusOr<std::vector<TrialResult>> ListResults(const store::TrialQuery& query);
  // Calls `visit` with the curve of `metric` of each trial of the sweep that has one, in id
  // order, a page at a time; stops at, and returns, the first error `visit` returns.
  absl::Status ForEachCurve(
      int64_t sweep_id, const std::string& metric,
      const std::function<absl::Status(const TrialRecord&, const CurveRecord&)>& visit);
  // The same for the per-layer values of `query` (query.field a valid field name, sublayer ""
  // or a valid sublayer: InvalidArgument otherwise) of each trial that has some.
  absl::Status ForEachLayerSeries(
      int64_t sweep_id, const LayerValueQuery& query,
      const std::function<absl::Status(const TrialRecord&, const std::vector<LayerSeries>&)>&
          visit);
  // A cursor over the changes of one sweep (see SweepWatch); wait between passes with
  // WaitForChange.
  std::unique_ptr<SweepWatch> Watch(int64_t sweep_id);

  // API tokens (see TokenKeeper).
  TokenKeeper& tokens() { return tokens_; }
  const CoordinatorOptions& options() const { return options_; }
  // Runs one housekeeping pass now (tests with a fake clock call it).
  void Housekeeping();

 private:
  Coordinator(store::Store* store, metrics::CoordinatorMetrics* metrics, const Clock* clock,
              CoordinatorOptions options);
  absl::Status Restore();
  // Rebuilds the scheduler from the store (the last committed state); with mutex_ held.
  absl::Status LoadLocked(int64_t now, bool after_failed_commit);
  // One scheduler decision: runs `decide(now, changes)` under mutex_, queues what it changed to
  // the store in decision order, and waits for the commit (outside the lock, so that concurrent
  // decisions share a transaction). A refusal (an error from `decide`) changes nothing. A failed
  // commit fails every decision queued after it too (Store::Apply); the first caller to see it
  // reloads the scheduler from the store, so memory never runs ahead of the disk, and each
  // caller gets the error.
  absl::Status Decide(const std::function<absl::Status(int64_t now, Changes* changes)>& decide);
  // The first decision after a stall (see CoordinatorOptions::stall_ms) renews the leases of the
  // workers alive before it, into `changes`, logs it and counts it; with mutex_ held.
  void NoticeStallLocked(int64_t now, Changes* changes);
  // What the worker of an evaluation job runs (nothing for a training trial).
  static EvalWork EvalWorkOf(const TrialRecord& trial);
  // Why `trial` gets no (further) evaluation job (its `plan` says), or the job's spec.
  absl::StatusOr<std::optional<TrialSpec>> PlanEvaluation(const TrialRecord& trial,
                                                          const std::vector<TrialRecord>& trials,
                                                          const EvalRequest& request,
                                                          EvalPlan* plan);
  // ASHA (coordinator_search.cc): rebuilds the rung boards of the active searches from the
  // store; with mutex_ held.
  absl::Status LoadRungsLocked();
  // Judges the search metric's rows of a live search trial's batch at its rungs; with mutex_
  // held, inside a decision.
  void JudgeLocked(const TrialRecord& trial, const std::vector<MetricRow>& rows, Changes* changes);
  // The values recorded at `rung` over every group of a sweep's search; with mutex_ held.
  int64_t TrialsAtRungLocked(int64_t sweep_id, int rung) const;
  // Judges a batch's rows when its trial is a live ASHA search trial (a decision of its own).
  absl::Status JudgeBatch(const EventBatchRecord& batch);
  // Adds the confirm trials of the ended groups of one sweep (ConfirmDue).
  absl::Status Confirm(int64_t sweep_id);
  // Hands the trials a submit created to the scheduler (their sweep too, when new or reopened).
  void Admit(const store::SubmitOutcome& outcome);
  // Bumps the sweeps' change counters and drops ended trials' gauges; with mutex_ held.
  void TrackTrialsLocked(const std::vector<TrialRecord>& trials);
  void Loop();

  store::Store* store_;
  metrics::CoordinatorMetrics* metrics_;
  const Clock* clock_;
  CoordinatorOptions options_;
  TokenKeeper tokens_;

  // What the gauges of a running trial need: its labels and its model's depth (n_layer x loops).
  struct LiveTrial {
    metrics::TrialLabels labels;
    int64_t depth = 0;
    bool dropped_rows_logged = false;  // rows beyond its depth were dropped, and it was said
  };
  // Counts the `values` of diag rows of a trial dropped as beyond its `depth`, and says so once
  // per trial.
  void DroppedRows(int64_t trial_id, int64_t depth, int64_t values);
  // Starts tracking a trial that now runs; with mutex_ held.
  void TrackRunningLocked(const TrialRecord& trial, const std::string& sweep_name);
  // Tracks the trials a decision made RUNNING again (revived lapsed attempts); with mutex_ held.
  void TrackRevivedLocked(const Changes& changes);
  // Hands back leases granted to a caller that gave up before they were answered.
  void HandBack(const std::vector<Lease>& grants, const std::string& worker_id,
                const absl::Status& why);

  std::mutex mutex_;  // guards scheduler_, live_, versions_ and the search state below
  sched::Scheduler scheduler_;
  std::map<int64_t, LiveTrial> live_;    // running trials
  std::map<int64_t, int64_t> versions_;  // per sweep, for WaitForChange
  // ASHA: the values recorded at each rung, per (sweep, search group) of active searches.
  std::map<std::pair<int64_t, std::string>, sched::RungBoard> boards_;
  std::map<int64_t, int64_t> max_iters_;  // of search trials judged so far, by trial
  std::set<int64_t> confirm_due_;         // sweeps whose search trials ended since ConfirmDue
  bool confirm_all_ = true;               // ConfirmDue's first call checks every sweep
  uint64_t reloads_ = 0;                  // reloads after failed commits (a failure is undone once)
  int64_t last_decision_ms_ = 0;          // the clock at the latest decision (or load)
  int64_t grants_from_ms_ = 0;            // after a stall, Acquire grants nothing before this
  std::atomic<bool> liveness_failing_{false};  // the last SetLastAlive failed
  std::condition_variable changed_;

  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};
  std::thread housekeeping_;
};

}  // namespace spheret
