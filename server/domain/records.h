// The coordinator's domain records, shared by the scheduler (memory) and the store (SQLite).
// Plain structs with no behaviour; the proto types stop at server/rpc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/diag_values.h"
#include "protocol/metric_catalog.h"
#include "protocol/trial_states.h"

namespace spheret {

class TrialConfig;  // config/trial_config.h

// A sweep as stored: the parts of its spec the scheduler needs, plus the file itself.
// A trial as a sweep file expands into it (server/sweep/sweep_expand.h), before the store gives
// it an id and a state.
struct TrialSpec {
  std::string config_json;  // canonical JSON
  std::string trial_key;    // SHA-256 hex of config_json (an evaluation's: EvalJobKey)
  // An evaluation job (`spheret eval`): the trial whose checkpoint of `eval_step` it scores on
  // its config's eval_tasks; 0 for a training trial.
  int64_t eval_of = 0;
  int64_t eval_step = 0;
  // A trial of a sweep with a `search:` block: its role ("search", or "confirm" for a re-run of
  // a group's best setting over the confirm seeds; "" in a plain grid) and its group (the JSON
  // object of its group_by knobs, "{}" for one group).
  std::string role{};
  std::string search_group{};
};

// A sweep's `search:` block as the coordinator applies it (server/sweep/sweep_search.h parses it).
struct SearchSettings {
  std::string strategy;  // "" (no search block), "grid", "random" or "asha"
  std::string metric = protocol::kValLoss;
  bool minimize = true;
  int64_t min_iters = 0;               // asha: the first rung's step
  int reduction_factor = 3;            // asha: eta
  std::vector<int64_t> confirm_seeds;  // empty: no confirm trials
  int confirm_top = 1;                 // settings per group confirmed
  bool asha() const { return strategy == "asha"; }
};

struct SweepRecord {
  int64_t sweep_id = 0;
  std::string name;
  std::string spec_yaml;
  std::string idempotency_key;  // "" = none
  int priority = 50;
  int max_restarts = 3;
  int gpus = 0;            // GPUs per node; 0 = CPU workers
  int slots_per_node = 1;  // GPUs or CPU slots per node
  int nodes = 1;
  std::string metric = protocol::kValLoss;
  bool minimize = true;
  SweepState state = SweepState::kActive;
  int64_t submitted_ms = 0;
  SearchSettings search;
};

struct TrialRecord {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  std::string trial_key;
  std::string config_json;
  TrialState state = TrialState::kPending;
  int attempt = 0;   // leases granted so far
  int failures = 0;  // attempts that failed (error exit or lost lease); hand-backs do not count
  int priority = 50;
  bool cancel_requested = false;
  int64_t not_before_ms = 0;  // back-off: not leased before this time
  int64_t created_ms = 0;
  std::string error;
  int64_t eval_of = 0;           // an evaluation job: the trial it scores (TrialSpec)
  int64_t eval_step = 0;         // ... at its checkpoint of this step
  std::string role;              // TrialSpec
  std::string search_group;      // TrialSpec
  int rung = 0;                  // ASHA: rungs it has been judged at (sched/rungs.h)
  bool prune_requested = false;  // ASHA stopped it: PRUNED when its attempt ends
  bool prune_exempt = false;     // resumed by hand after PRUNED: never stopped again
  // config_json read once, where the record entered the coordinator (server/trial_configs.h):
  // shared and immutable, so the record's copies share it; null in a record that no coordinator
  // typed (the store's, the scheduler's tests).
  std::shared_ptr<const TrialConfig> config;
};

// One value an ASHA search recorded at a rung (the rung's judgement of a trial).
struct RungValue {
  int64_t sweep_id = 0;
  std::string search_group;
  int rung = 0;
  int64_t trial_id = 0;
  int64_t step = 0;  // the report's step (at or past the rung's)
  double value = 0;
  bool promoted = false;
};

// Where the ranks of a gang meet (torchrun's variables).
struct Rendezvous {
  std::string master_addr;
  int master_port = 0;
  int nodes = 1;
  int slots_per_node = 1;
  int ranks_per_node = 1;  // trainer processes per node: its GPUs, or 1 on CPU (threads = slots)
};

// One worker's part of a trial attempt (a gang has one per node).
struct LeaseRecord {
  int64_t trial_id = 0;
  int attempt = 0;
  std::string worker_id;
  int node_rank = 0;
  std::vector<int> slots;  // slot indices on the worker (GPU indices on a GPU worker)
  int64_t expires_ms = 0;
  bool delivered = false;  // the worker has received it (gang members receive it on Acquire)
  Rendezvous rendezvous;
};

struct WorkerRecord {
  std::string worker_id;
  std::string host;
  std::vector<int> gpus;
  std::vector<std::string> gpu_names;
  int cpu_slots = 0;
  std::string version;
  // A random name the daemon picks at start-up: two live daemons with one worker id are told
  // apart by it ("" from a client that sends none: never compared). Not stored.
  std::string instance;
  int64_t registered_ms = 0;
  int64_t last_seen_ms = 0;
};

// The end of one attempt, as recorded in `attempts`.
struct AttemptEnd {
  int64_t trial_id = 0;
  int attempt = 0;
  TrialState outcome = TrialState::kFailed;
  int exit_code = 0;
  std::string stderr_tail;
  int64_t ended_ms = 0;
};

struct AttemptStart {
  int64_t trial_id = 0;
  int attempt = 0;
  std::string worker_id;
  int64_t started_ms = 0;
};

// Everything one scheduler decision changed, written in one transaction before it is answered.
struct Changes {
  std::vector<TrialRecord> trials;  // new state, attempt, not_before, cancel flag, error
  std::vector<LeaseRecord> leases_put;
  std::vector<int64_t> leases_dropped;  // trial ids whose leases end
  std::vector<AttemptStart> attempts_started;
  std::vector<AttemptEnd> attempts_ended;
  std::vector<std::pair<int64_t, SweepState>> sweeps;
  std::vector<WorkerRecord> workers;   // registered or seen
  std::vector<RungValue> rung_values;  // ASHA's judgements (with the trials they stop)
  bool empty() const {
    return trials.empty() && leases_put.empty() && leases_dropped.empty() &&
           attempts_started.empty() && attempts_ended.empty() && sweeps.empty() &&
           workers.empty() && rung_values.empty();
  }
};

// One metric value from a trainer.
struct MetricRow {
  std::string name;
  int64_t step = 0;
  double value = 0;
  int64_t wall_ms = 0;
};

// The per-layer values of one row (layer, sublayer) at one step, from a trainer `diag` event
// (rules in protocol/diag_values.h; NaN where the trainer had no finite value).
struct DiagRecord {
  int64_t step = 0;
  int64_t layer = 0;
  std::string sublayer;                                // attn, mlp, model or dyadic
  std::vector<std::pair<std::string, double>> values;  // (field, value), unique fields
};

// protocol/diag_values.h, where the row-to-depth rule lives.
using protocol::DiagRowWithinDepth;

// A zero-shot score from an `eval` event.
struct EvalRecord {
  std::string task;
  std::string metric;
  double value = 0;
  double std_error = 0;  // its standard error; NaN when the trainer gave none
  int64_t step = 0;
  std::string error = "";  // metric "error": why the evaluation failed
};

// A batch of one attempt's events, typed by the worker; no JSON is parsed past it.
struct EventBatchRecord {
  int64_t trial_id = 0;
  int attempt = 0;
  std::vector<MetricRow> metrics;
  std::vector<std::pair<int64_t, std::string>> other_events;  // (seq, JSON line) stored as text
  int64_t checkpoint_step = 0;                                // 0 = none
  std::string checkpoint_path;
  std::vector<DiagRecord> diags;  // the diag events (never stored as text)
  std::vector<EvalRecord> evals;  // typed from the eval events among other_events
  int64_t evals_of = 0;           // the trial the evals score (an evaluation job's); 0: trial_id
};

struct MetricSummary {
  double last = 0, min = 0, max = 0;
  int64_t count = 0, last_step = 0;
};

// One attempt of a trial as stored in `attempts` (ended_ms 0 and outcome empty while it runs).
struct AttemptRecord {
  int attempt = 0;
  std::string worker_id;
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  std::string outcome;  // a TrialState name, PENDING for a hand-back
  int exit_code = 0;
  std::string stderr_tail;
};

// A stored trainer event other than a metric (diag, eval, done, diverged, error, ...).
struct EventRecord {
  int attempt = 0;
  int64_t seq = 0;
  std::string json;
};

// Which of a trial's stored events to read: the newest `limit` older than `before` (none: the
// newest of all), stopping early when they would pass `max_bytes`, each counted as its text plus
// kEventFramingBytes (one event is always read, whatever its size).
inline constexpr size_t kEventFramingBytes = 32;  // an event's share of a reply besides its text
struct EventPageQuery {
  int limit = 200;
  size_t max_bytes = SIZE_MAX;
  std::optional<std::pair<int, int64_t>> before;  // (attempt, seq), exclusive
};

// A page of stored events, oldest first; `more` when `max_bytes` left older ones of the `limit`
// for another page.
struct EventPage {
  std::vector<EventRecord> events;
  bool more = false;
};

// One metric's curve of one trial, without superseded values, by step.
struct CurveRecord {
  int64_t trial_id = 0;
  std::vector<int64_t> steps;
  std::vector<double> values;
};

// One per-layer field's values at one (layer, sublayer) of a trial over training, by step,
// without the values a resumed attempt replaced.
struct LayerSeries {
  int64_t layer = 0;
  std::string sublayer;
  std::vector<int64_t> steps;
  std::vector<double> values;  // NaN where the trainer had no finite value
};

// Which stored per-layer values to read: one field, optionally one sublayer and ranges.
struct LayerValueQuery {
  std::string field;     // required
  std::string sublayer;  // "" every sublayer
  int64_t min_layer = 0, max_layer = INT64_MAX;
  int64_t min_step = 0, max_step = INT64_MAX;
};

// What an API token may do: admin everything; submit sweeps (submit, cancel, read); read sweeps;
// worker the worker service, for the one worker id the token is bound to.
enum class Role { kAdmin, kSubmit, kRead, kWorker };

// "admin", "submit", "read", "worker", as stored in SQL and given on command lines.
const char* RoleName(Role role);
// InvalidArgument naming the valid roles for anything else.
absl::StatusOr<Role> ParseRole(std::string_view name);

// An API token as listed (the token itself is never stored, only its hash).
struct TokenRecord {
  std::string name;
  Role role = Role::kRead;
  std::string hash_prefix;  // the first 12 hex digits of its SHA-256, to tell tokens apart
  int64_t created_ms = 0;
  std::string worker_id;   // the worker a worker token speaks for ("" for other roles)
  int64_t expires_ms = 0;  // refused from then on (Unix epoch ms); 0: never expires
  int64_t token_id = 0;    // its row, in creation order (for paging)
};

// Who a token speaks for.
struct TokenIdentity {
  Role role = Role::kRead;
  std::string worker_id;   // a worker token's bound worker id ("" for other roles)
  int64_t expires_ms = 0;  // refused from then on (Unix epoch ms); 0: never expires
};

}  // namespace spheret
