-- Version 7: one typed road for per-layer data. A trainer's diag event carries named values for
-- one row (layer, sublayer) of one step; they are stored here, one row per (trial, field, layer,
-- sublayer, step, attempt), instead of as metrics named diag/FIELD/LAYER/SUBLAYER and again as
-- the event's JSON text. Attempts, idempotent re-ingestion and resume supersession work as for
-- `scalars`.
CREATE TABLE diag_fields (
  field_id INTEGER PRIMARY KEY,
  name     TEXT NOT NULL UNIQUE
) STRICT;

-- sublayer attn or mlp: layer from 1 (the depth over the loops of a looped model); model: layer
-- 0 (whole-model values of the step); dyadic: layer m, the budget of the updates m, ..., 2m - 1.
CREATE TABLE layer_values (
  trial_id   INTEGER NOT NULL,
  field_id   INTEGER NOT NULL,
  sublayer   TEXT NOT NULL CHECK (sublayer IN ('attn', 'mlp', 'model', 'dyadic')),
  layer      INTEGER NOT NULL,
  step       INTEGER NOT NULL,
  attempt    INTEGER NOT NULL,
  value      REAL,
  superseded INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (trial_id, field_id, sublayer, layer, step, attempt)
) STRICT, WITHOUT ROWID;

-- Per-layer values without those a resumed attempt replaced, by field name.
CREATE VIEW layer_curves AS
SELECT lv.trial_id, f.name AS field, lv.layer, lv.sublayer, lv.step, lv.value, lv.attempt
FROM layer_values lv JOIN diag_fields f USING (field_id)
WHERE lv.superseded = 0;

-- The per-layer metrics of earlier versions, diag/FIELD/LAYER/SUBLAYER, move here: the name is
-- split once, in this migration (no name is parsed at run time). Names that are not of that
-- form stay metrics.
CREATE TEMP TABLE diag_names AS
WITH parts AS (
  SELECT metric_id, substr(name, 6) AS rest FROM metric_names WHERE name GLOB 'diag/*/*/*'
), field_split AS (
  SELECT metric_id, substr(rest, 1, instr(rest, '/') - 1) AS field,
         substr(rest, instr(rest, '/') + 1) AS rest
  FROM parts
), layer_split AS (
  SELECT metric_id, field, substr(rest, 1, instr(rest, '/') - 1) AS layer_text,
         substr(rest, instr(rest, '/') + 1) AS sublayer
  FROM field_split
)
SELECT metric_id, field, CAST(layer_text AS INTEGER) AS layer, sublayer
FROM layer_split
WHERE length(field) BETWEEN 1 AND 40 AND field NOT GLOB '*[^a-z0-9_]*'
  AND length(layer_text) BETWEEN 1 AND 4 AND layer_text NOT GLOB '*[^0-9]*'
  AND CAST(layer_text AS INTEGER) BETWEEN 1 AND 4096 AND sublayer IN ('attn', 'mlp');

INSERT INTO diag_fields(name) SELECT DISTINCT field FROM diag_names ORDER BY field;

INSERT INTO layer_values(trial_id, field_id, sublayer, layer, step, attempt, value, superseded)
SELECT s.trial_id, f.field_id, d.sublayer, d.layer, s.step, s.attempt, s.value, s.superseded
FROM scalars s JOIN diag_names d USING (metric_id) JOIN diag_fields f ON f.name = d.field;

DELETE FROM scalars WHERE metric_id IN (SELECT metric_id FROM diag_names);
DELETE FROM summaries WHERE metric_id IN (SELECT metric_id FROM diag_names);
DELETE FROM metric_names WHERE metric_id IN (SELECT metric_id FROM diag_names);
DROP TABLE temp.diag_names;

-- The diag events' JSON text held the same values again: they are in layer_values now.
DELETE FROM events
WHERE CASE WHEN json_valid(json) THEN json_extract(json, '$.type') END = 'diag';
