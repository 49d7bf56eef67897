-- Version 3: failures count apart from attempts, so hand-backs (a worker shutting down, a
-- pre-emption) do not use up max_restarts. Existing trials start from their failed attempts.
ALTER TABLE trials ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
UPDATE trials SET failures = (
  SELECT count(*) FROM attempts a WHERE a.trial_id = trials.trial_id AND a.outcome = 'FAILED');
