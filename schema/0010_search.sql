-- Version 10: searches (a sweep's `search:` block: random draws, ASHA, confirm trials).
-- sweeps.search: the block as the coordinator applies it (JSON: strategy, metric, minimize,
-- min_iters, reduction_factor, confirm_seeds, confirm_top), '' for a plain grid.
ALTER TABLE sweeps ADD COLUMN search TEXT NOT NULL DEFAULT '';
-- A trial's role ('search', 'confirm', '' in a plain grid), its group (the JSON object of its
-- group_by knobs), the ASHA rungs it was judged at, whether ASHA stopped it (PRUNED when its
-- attempt ends), and whether a hand resume exempts it from being stopped again.
ALTER TABLE trials ADD COLUMN role TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN search_group TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN rung INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN prune_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN prune_exempt INTEGER NOT NULL DEFAULT 0;
-- Every value ASHA recorded at a rung, with its verdict: what later reports of the group are
-- ranked against (reloaded after a restart), and what `spheret plot` and Grafana show per rung;
-- rowid is the order in which they were judged.
CREATE TABLE rung_values (
  trial_id     INTEGER NOT NULL REFERENCES trials(trial_id),
  rung         INTEGER NOT NULL,
  sweep_id     INTEGER NOT NULL REFERENCES sweeps(sweep_id),
  search_group TEXT NOT NULL,
  step         INTEGER NOT NULL,
  value        REAL NOT NULL,
  promoted     INTEGER NOT NULL,
  PRIMARY KEY (trial_id, rung)
) STRICT;
CREATE INDEX rung_values_by_group ON rung_values(sweep_id, search_group, rung);
