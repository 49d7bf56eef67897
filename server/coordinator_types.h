// What the coordinator's calls take and return (server/coordinator.h), in domain types: its
// options, a submission's result, leases with their evaluation work, evaluation requests and
// plans, and the views its reads return. Plain structs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/domain/records.h"
#include "server/sched/scheduler.h"
#include "server/store/store.h"
#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"
#include "server/sweep_watch.h"

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
  std::vector<TrialSpec> trials;     // the expanded grid
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

}  // namespace spheret
