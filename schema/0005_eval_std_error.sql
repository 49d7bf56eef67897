-- Version 5: evals.stderr (a standard error, not a process's stderr) is named std_error, as in
-- the eval event, the proto and the CLI.
ALTER TABLE evals RENAME COLUMN stderr TO std_error;
