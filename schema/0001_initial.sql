-- spheret coordinator database, version 1. Forward-only: later changes go in 0002_*.sql and so on.
-- States are stored by name (PENDING, RUNNING, ...) so that the file reads well in plain sqlite3.

CREATE TABLE sweeps (
  sweep_id        INTEGER PRIMARY KEY,
  name            TEXT NOT NULL UNIQUE,
  spec_yaml       TEXT NOT NULL,
  idempotency_key TEXT UNIQUE,
  priority        INTEGER NOT NULL,
  max_restarts    INTEGER NOT NULL,
  gpus            INTEGER NOT NULL,
  slots_per_node  INTEGER NOT NULL,
  nodes           INTEGER NOT NULL,
  metric          TEXT NOT NULL,
  minimize        INTEGER NOT NULL,
  state           TEXT NOT NULL,
  submitted_ms    INTEGER NOT NULL
) STRICT;

CREATE TABLE trials (
  trial_id         INTEGER PRIMARY KEY,
  sweep_id         INTEGER NOT NULL REFERENCES sweeps(sweep_id),
  trial_key        TEXT NOT NULL,
  config_json      TEXT NOT NULL,
  state            TEXT NOT NULL,
  attempt          INTEGER NOT NULL DEFAULT 0,
  priority         INTEGER NOT NULL,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  not_before_ms    INTEGER NOT NULL DEFAULT 0,
  created_ms       INTEGER NOT NULL,
  ended_ms         INTEGER,
  error            TEXT NOT NULL DEFAULT '',
  UNIQUE (sweep_id, trial_key)
) STRICT;
CREATE INDEX trials_by_state ON trials(state, trial_id);

CREATE TABLE workers (
  worker_id     TEXT PRIMARY KEY,
  host          TEXT NOT NULL,
  gpus_json     TEXT NOT NULL,
  gpu_names     TEXT NOT NULL,
  cpu_slots     INTEGER NOT NULL,
  version       TEXT NOT NULL,
  registered_ms INTEGER NOT NULL,
  last_seen_ms  INTEGER NOT NULL
) STRICT;

CREATE TABLE attempts (
  trial_id    INTEGER NOT NULL REFERENCES trials(trial_id),
  attempt     INTEGER NOT NULL,
  worker_id   TEXT NOT NULL,
  started_ms  INTEGER NOT NULL,
  ended_ms    INTEGER,
  outcome     TEXT,
  exit_code   INTEGER,
  stderr_tail TEXT,
  PRIMARY KEY (trial_id, attempt)
) STRICT;

-- One row per node of a live attempt; deleted when the attempt ends.
CREATE TABLE leases (
  trial_id      INTEGER NOT NULL REFERENCES trials(trial_id),
  node_rank     INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,
  worker_id     TEXT NOT NULL,
  slots_json    TEXT NOT NULL,
  expires_ms    INTEGER NOT NULL,
  delivered     INTEGER NOT NULL,
  master_addr   TEXT NOT NULL,
  master_port   INTEGER NOT NULL,
  nodes         INTEGER NOT NULL,
  slots_per_node INTEGER NOT NULL,
  PRIMARY KEY (trial_id, node_rank)
) STRICT;

CREATE TABLE metric_names (
  metric_id INTEGER PRIMARY KEY,
  name      TEXT NOT NULL UNIQUE
) STRICT;

-- Every metric value of every attempt; a value of an older attempt at or past the step where a
-- newer attempt resumed is marked superseded, so curves stay monotone in step.
CREATE TABLE scalars (
  trial_id   INTEGER NOT NULL,
  metric_id  INTEGER NOT NULL,
  step       INTEGER NOT NULL,
  attempt    INTEGER NOT NULL,
  value      REAL,
  wall_ms    INTEGER NOT NULL,
  superseded INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (trial_id, metric_id, step, attempt)
) STRICT, WITHOUT ROWID;

CREATE TABLE summaries (
  trial_id  INTEGER NOT NULL,
  metric_id INTEGER NOT NULL,
  last      REAL,
  min       REAL,
  max       REAL,
  count     INTEGER NOT NULL,
  last_step INTEGER NOT NULL,
  PRIMARY KEY (trial_id, metric_id)
) STRICT, WITHOUT ROWID;

-- Trainer events other than metrics (diag, eval, done, diverged, error), as JSON lines.
CREATE TABLE events (
  event_id INTEGER PRIMARY KEY,
  trial_id INTEGER NOT NULL,
  attempt  INTEGER NOT NULL,
  json     TEXT NOT NULL
) STRICT;
CREATE INDEX events_by_trial ON events(trial_id, attempt);

CREATE TABLE evals (
  trial_id  INTEGER NOT NULL,
  task      TEXT NOT NULL,
  metric    TEXT NOT NULL,
  value     REAL,
  stderr    REAL,
  ckpt_step INTEGER NOT NULL,
  PRIMARY KEY (trial_id, task, metric, ckpt_step)
) STRICT;

CREATE TABLE checkpoints (
  trial_id   INTEGER NOT NULL,
  step       INTEGER NOT NULL,
  attempt    INTEGER NOT NULL,
  path       TEXT NOT NULL,
  written_ms INTEGER NOT NULL,
  PRIMARY KEY (trial_id, step)
) STRICT;

CREATE TABLE api_tokens (
  token_hash TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  role       TEXT NOT NULL CHECK (role IN ('admin', 'submit', 'worker', 'read')),
  created_ms INTEGER NOT NULL
) STRICT;

-- Coordinator bookkeeping: 'last_alive_ms' (for extending leases by the downtime after a restart).
CREATE TABLE coordinator_state (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) STRICT;

-- The paper's tables: one row per trial and metric with its final summary.
CREATE VIEW trial_results AS
SELECT t.sweep_id, t.trial_id, t.state, t.config_json, m.name AS metric,
       s.last, s.min, s.max, s.count, s.last_step
FROM trials t JOIN summaries s USING (trial_id) JOIN metric_names m USING (metric_id);

-- Curves without the values a resumed attempt replaced.
CREATE VIEW curves AS
SELECT sc.trial_id, m.name AS metric, sc.step, sc.value, sc.attempt, sc.wall_ms
FROM scalars sc JOIN metric_names m USING (metric_id)
WHERE sc.superseded = 0;
