-- Version 6: an evaluation that failed is a row with metric 'error', no value, and its message
-- here (the trial's training results stay as they are).
ALTER TABLE evals ADD COLUMN error TEXT;
