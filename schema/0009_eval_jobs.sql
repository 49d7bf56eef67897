-- Version 9: evaluation jobs (`spheret eval`). A trial row with eval_of > 0 scores the checkpoint
-- of step eval_step of trial eval_of on its config's eval_tasks; it is leased, retried and stored
-- like a training trial, and its scores land in `evals` under the trial it scores.
ALTER TABLE trials ADD COLUMN eval_of INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN eval_step INTEGER NOT NULL DEFAULT 0;
CREATE INDEX trials_by_eval_of ON trials(eval_of) WHERE eval_of > 0;
