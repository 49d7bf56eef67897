-- Version 4: a worker token is bound to one worker id; it may speak only for that worker and touch
-- only the leases that worker holds. Tokens of other roles, and worker tokens made before this
-- version, have '' (such worker tokens are refused until replaced by bound ones).
ALTER TABLE api_tokens ADD COLUMN worker_id TEXT NOT NULL DEFAULT '';
