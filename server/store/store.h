// The coordinator's durable state. Every write returns (or resolves its future) only after its
// transaction committed, so whatever the coordinator acknowledges survives a crash. Writes are
// applied in the order they are submitted. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/domain/records.h"

namespace spheret::store {

struct StoreOptions {
  std::string path;               // the SQLite file (created when missing)
  int read_connections = 4;       // connections for queries, beside the one writer
  bool synchronous_full = true;   // fsync every commit (survives power loss, not only crashes)
  int max_batch_commands = 4096;  // commands grouped into one transaction at most
  // The writer's page cache (SQLite's default is 2 MiB): a 100,000-trial submit is one
  // transaction of about 60 MB of pages, with random inserts into the (sweep_id, trial_key) index.
  int writer_cache_mib = 64;
};

// The outcome of a submit: the sweep (new, or found by idempotency key or name; without its
// spec_yaml) and the trials this call created (none when the same file was submitted before).
struct SubmitOutcome {
  SweepRecord sweep;
  std::vector<TrialRecord> created;
  int64_t trial_count = 0;  // trials of the sweep in all
};

// Everything needed to rebuild the scheduler after a restart.
struct RestoredState {
  std::vector<SweepRecord> sweeps;
  std::vector<TrialRecord> live_trials;  // PENDING and RUNNING
  std::vector<LeaseRecord> leases;
  std::vector<WorkerRecord> workers;
  int64_t last_alive_ms = 0;  // 0 for a new database
};

struct TrialQuery {
  int64_t sweep_id = 0;            // 0: every sweep
  std::vector<TrialState> states;  // empty: every state
  int64_t after_trial_id = 0;      // paging
  int limit = 100;
  bool trainings_only = false;  // leave out evaluation jobs (TrialRecord::eval_of > 0)
};

class StateStore;
// Every trial of a sweep, in id order (ListTrials a page at a time).
absl::StatusOr<std::vector<TrialRecord>> AllTrials(StateStore& store, int64_t sweep_id);

struct StoreStats {
  int64_t commits = 0;
  int64_t metric_rows = 0;
};

// The scheduler's state: sweeps, trials, leases, workers, attempts, and the decisions that move
// them.
class StateStore {
 public:
  virtual ~StateStore() = default;

  // Creates the sweep (or finds it by idempotency key, else by name) and its missing trials.
  virtual absl::StatusOr<SubmitOutcome> SubmitSweep(const SweepRecord& sweep,
                                                    const std::vector<TrialSpec>& trials,
                                                    int64_t now_ms) = 0;
  // Queues a scheduler decision; the future resolves when it is committed. Decisions build on
  // each other: once one fails, every later one fails (Unavailable) without being written, until
  // ResumeDecisions, so the database never holds a decision whose predecessor it lacks.
  virtual std::future<absl::Status> Apply(Changes changes, int64_t now_ms) = 0;
  // Accepts decisions again after a failed one; resolves once every write queued before it is
  // done (the caller then reloads its state from the store).
  virtual std::future<absl::Status> ResumeDecisions() = 0;
  // Records that the coordinator was alive at `now_ms` (a restart extends leases by the time
  // since the last mark).
  virtual absl::Status SetLastAlive(int64_t now_ms) = 0;

  virtual absl::StatusOr<RestoredState> LoadState() = 0;
  // One sweep with its spec_yaml.
  virtual absl::StatusOr<SweepRecord> GetSweep(int64_t sweep_id) = 0;
  // Sweeps after `after_sweep_id` by id, at most `limit`, without their spec_yaml (nor does
  // LoadState read it): no list holds every sweep's file.
  virtual absl::StatusOr<std::vector<SweepRecord>> ListSweeps(int64_t after_sweep_id,
                                                              int limit) = 0;
  // Trials per state name, of one sweep (0: of all).
  virtual absl::StatusOr<std::map<std::string, int64_t>> CountTrials(int64_t sweep_id) = 0;
  // Evaluation jobs (TrialRecord::eval_of > 0) per state name, of all sweeps.
  virtual absl::StatusOr<std::map<std::string, int64_t>> CountEvalJobs() = 0;
  virtual absl::StatusOr<std::vector<TrialRecord>> ListTrials(const TrialQuery& query) = 0;
  virtual absl::StatusOr<std::optional<TrialRecord>> GetTrial(int64_t trial_id) = 0;
  // A trial's attempts, oldest first.
  virtual absl::StatusOr<std::vector<AttemptRecord>> Attempts(int64_t trial_id) = 0;
  // ASHA's judgements of a sweep (0: every sweep), by sweep, group, rung and trial.
  virtual absl::StatusOr<std::vector<RungValue>> RungValues(int64_t sweep_id) = 0;
};

// What trials report: metric values, per-layer values, stored events, zero-shot scores.
class MetricStore {
 public:
  virtual ~MetricStore() = default;

  // Stores one batch of an attempt's events; rows already stored are skipped (replays are
  // harmless). Diag rows go to the per-layer values, one per (field, layer, sublayer, step), and
  // their values of an older attempt at or past the first step this attempt reports are
  // superseded, as metric values are. Precondition: every diag row passed
  // protocol::DiagRowError. Returns how many of the batch's metric rows were new.
  virtual absl::StatusOr<int64_t> AppendEvents(const EventBatchRecord& batch) = 0;
  // Per metric name, the summary of a trial's values.
  virtual absl::StatusOr<std::map<std::string, MetricSummary>> Summaries(int64_t trial_id) = 0;
  // A page of a trial's non-metric events, in order (EventPageQuery says which).
  virtual absl::StatusOr<EventPage> Events(int64_t trial_id, const EventPageQuery& query) = 0;
  // A trial's zero-shot scores (the latest checkpoint's per task and metric).
  virtual absl::StatusOr<std::vector<EvalRecord>> Evals(int64_t trial_id) = 0;
  // The step of a trial's latest recorded checkpoint; 0 when it recorded none.
  virtual absl::StatusOr<int64_t> LatestCheckpointStep(int64_t trial_id) = 0;
  // One metric's curve of one trial (empty when the trial has no such values).
  virtual absl::StatusOr<CurveRecord> Curve(int64_t trial_id, const std::string& metric) = 0;
  // One field's per-layer values of one trial, restricted to query's sublayer (unless "") and
  // layer and step ranges: a series per (layer, sublayer), ordered by sublayer name then layer,
  // each by step without superseded values; empty when the trial has none.
  virtual absl::StatusOr<std::vector<LayerSeries>> LayerValues(int64_t trial_id,
                                                               const LayerValueQuery& query) = 0;
};

// API tokens, stored as SHA-256 hashes.
class TokenStore {
 public:
  virtual ~TokenStore() = default;

  // InvalidArgument for a worker token without a worker id (or another role with one).
  // expires_ms: refused from then on (Unix epoch ms); 0: never.
  virtual absl::Status CreateToken(const std::string& token_hash, const std::string& name,
                                   Role role, const std::string& worker_id, int64_t now_ms,
                                   int64_t expires_ms = 0) = 0;
  // Tokens after token_id `after` in creation order, at most `limit`.
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens(int64_t after = 0,
                                                              int limit = 1000) = 0;
  // Deletes the tokens named `name`; returns how many there were.
  virtual absl::StatusOr<int64_t> RevokeToken(const std::string& name) = 0;
  // Who a token hash speaks for, or nullopt when unknown.
  virtual absl::StatusOr<std::optional<TokenIdentity>> FindToken(const std::string& token_hash) = 0;
};

// The coordinator's database: all three kinds over one SQLite file.
class Store : public StateStore, public MetricStore, public TokenStore {
 public:
  virtual StoreStats Stats() const = 0;
  // Called after each commit with its duration in seconds (for spheret_db_commit_seconds).
  virtual void OnCommit(std::function<void(double)> callback) = 0;
};

// Opens (creating and migrating when needed) the SQLite store at options.path.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const StoreOptions& options);

}  // namespace spheret::store
