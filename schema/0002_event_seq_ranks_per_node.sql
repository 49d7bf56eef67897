-- Version 2: trainer events carry their line number within the attempt (`seq`), so a batch that
-- a worker sends again (its acknowledgement was lost) stores nothing twice. Rows written before
-- this version get a negative, unique seq.
CREATE TABLE events_v2 (
  event_id INTEGER PRIMARY KEY,
  trial_id INTEGER NOT NULL,
  attempt  INTEGER NOT NULL,
  seq      INTEGER NOT NULL,
  json     TEXT NOT NULL,
  UNIQUE (trial_id, attempt, seq)
) STRICT;
INSERT INTO events_v2(event_id, trial_id, attempt, seq, json)
  SELECT event_id, trial_id, attempt, -event_id, json FROM events;
DROP TABLE events;
ALTER TABLE events_v2 RENAME TO events;

-- Trainer processes per node of a lease (one per GPU; 1 on CPU, where slots are threads).
ALTER TABLE leases ADD COLUMN ranks_per_node INTEGER NOT NULL DEFAULT 1;
