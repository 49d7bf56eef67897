// The coordinator's core: sweep submission, the scheduler behind one lock, the store, metrics and
// the lease-expiry loop. Speaks domain types and absl::Status; server/rpc maps gRPC onto it.
//
// Every decision is committed to the store before its call returns; a decision whose commit fails
// (a full disk, an I/O error) is undone in memory, with every decision queued after it, by
// reloading the scheduler from the store, so memory never runs ahead of the disk. Thread-safe.
//
// A thin facade over collaborators, one job each, that share one CoordinatorState (the store, the
// scheduler and its lock): Decisions (decisions and their commits), LiveTrials (running trials'
// gauges), Submissions (sweeps submitted and cancelled), LeaseKeeper (workers, leases,
// housekeeping), EventIntake (an attempt's events), Searches (ASHA, resumes, confirm trials),
// Evaluations (`spheret eval`'s jobs), Reads (what the API shows) and TokenKeeper (API tokens).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "server/coordinator_state.h"
#include "server/coordinator_types.h"
#include "server/decisions.h"
#include "server/evaluations.h"
#include "server/event_intake.h"
#include "server/lease_keeper.h"
#include "server/live_trials.h"
#include "server/reads.h"
#include "server/searches.h"
#include "server/submissions.h"
#include "server/tokens.h"

namespace spheret {

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
  // Schedules zero-shot evaluation jobs (Evaluations): for each SUCCEEDED training trial
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
  // order, a page at a time, and its point count; a curve of more than `max_points` points (0:
  // none) downsampled for a figure (server/curve_downsample.h; InvalidArgument for max_points 1
  // to 4 or negative); stops at, and returns, the first error `visit` returns.
  absl::Status ForEachCurve(
      int64_t sweep_id, const std::string& metric, int64_t max_points,
      const std::function<absl::Status(const TrialRecord&, const CurveRecord&, int64_t)>& visit);
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
  const CoordinatorOptions& options() const { return state_.options; }
  // Runs one housekeeping pass now (tests with a fake clock call it).
  void Housekeeping();

 private:
  Coordinator(store::Store* store, metrics::CoordinatorMetrics* metrics, const Clock* clock,
              CoordinatorOptions options);
  void Loop();

  CoordinatorState state_;
  TokenKeeper tokens_;
  LiveTrials live_{&state_};
  Decisions decisions_{&state_, &live_, &searches_};
  Searches searches_{&state_, &decisions_};
  Submissions submissions_{&state_, &decisions_};
  LeaseKeeper leases_{&state_, &decisions_, &live_, &searches_};
  EventIntake intake_{&state_, &live_, &searches_};
  Evaluations evaluations_{&state_, &decisions_};
  Reads reads_;

  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};
  std::thread housekeeping_;
};

}  // namespace spheret
