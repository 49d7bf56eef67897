-- Version 11: metric values packed, one row per ingested batch, trial, metric and attempt instead
-- of one row per value (issue 47: one row per value capped ingest below a bare SQLite writer's
-- ~745k rows/s). `scalars` and `curves` become views that unpack the rows with SQLite's built-in
-- json_each, returning the same rows as before: queries written for them keep working.
--
-- points: a JSON array of [step, value, wall_ms - scalar_blocks.wall_ms] per value, the value as
-- the shortest text that reads back as the same double (null where none was stored). Steps are
-- unique per (trial, metric, attempt) across a trial's blocks (a replay stores nothing twice), so
-- last_step is unique too. superseded_from: the values of the block at or after this step are
-- superseded (a newer attempt resumed there); NULL: none is.
CREATE TABLE scalar_blocks (
  block_id        INTEGER PRIMARY KEY,
  trial_id        INTEGER NOT NULL,
  metric_id       INTEGER NOT NULL,
  attempt         INTEGER NOT NULL,
  first_step      INTEGER NOT NULL,
  last_step       INTEGER NOT NULL,
  wall_ms         INTEGER NOT NULL,
  superseded_from INTEGER,
  points          TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX scalar_blocks_by_step
  ON scalar_blocks(trial_id, metric_id, attempt, last_step);

-- The rows of version 10, each value as the writer packs it: spheret_json_real, a function that
-- the coordinator registers for its migrations (std::to_chars; SQLite's printf does not give an
-- exact text for every double). The check refuses the migration where SQLite would read a text
-- back as another double than the one stored.
CREATE TEMP TABLE old_points AS
SELECT trial_id, metric_id, attempt, step, wall_ms, superseded, value,
       spheret_json_real(value) AS value_text
FROM scalars;
CREATE TEMP TABLE migration_check (values_read_back_differently INTEGER
                                   CHECK (values_read_back_differently = 0));
INSERT INTO migration_check
SELECT count(*) FROM old_points
WHERE value IS NOT NULL
  AND CAST(json_extract('[' || value_text || ']', '$[0]') AS REAL) IS NOT value;

-- Blocks: per (trial, metric, attempt) in step order, runs of the same superseded flag (a block
-- is superseded whole or not at all), cut every 1,000 values.
CREATE TEMP TABLE old_runs AS
SELECT *, sum(changed) OVER (PARTITION BY trial_id, metric_id, attempt ORDER BY step) AS run
FROM (SELECT *, superseded != lag(superseded, 1, superseded)
                  OVER (PARTITION BY trial_id, metric_id, attempt ORDER BY step) AS changed
      FROM old_points);
INSERT INTO scalar_blocks(trial_id, metric_id, attempt, first_step, last_step, wall_ms,
                          superseded_from, points)
SELECT trial_id, metric_id, attempt, min(step), max(step), base,
       CASE WHEN max(superseded) = 1 THEN min(step) END,
       '[' || group_concat('[' || step || ',' || value_text || ',' || (wall_ms - base) || ']',
                           ',') || ']'
FROM (SELECT *, min(wall_ms) OVER (PARTITION BY trial_id, metric_id, attempt, run, chunk) AS base
      FROM (SELECT *, (row_number() OVER (PARTITION BY trial_id, metric_id, attempt, run
                                          ORDER BY step) - 1) / 1000 AS chunk
            FROM old_runs)
      ORDER BY trial_id, metric_id, attempt, step)
GROUP BY trial_id, metric_id, attempt, run, chunk
ORDER BY trial_id, metric_id, attempt, min(step);
DROP TABLE temp.old_runs;
DROP TABLE temp.old_points;
DROP TABLE temp.migration_check;

DROP VIEW curves;
DROP TABLE scalars;

-- Every metric value of every attempt, one row per value as in versions 1 to 10; a value of an
-- older attempt at or past the step where a newer attempt resumed is marked superseded.
CREATE VIEW scalars AS
SELECT b.trial_id, b.metric_id, (p.value ->> 0) AS step, b.attempt,
       CAST(p.value ->> 1 AS REAL) AS value, b.wall_ms + (p.value ->> 2) AS wall_ms,
       coalesce((p.value ->> 0) >= b.superseded_from, 0) AS superseded
FROM scalar_blocks b, json_each(b.points) p;

-- Curves without the values a resumed attempt replaced.
CREATE VIEW curves AS
SELECT sc.trial_id, m.name AS metric, sc.step, sc.value, sc.attempt, sc.wall_ms
FROM scalars sc JOIN metric_names m USING (metric_id)
WHERE sc.superseded = 0;
