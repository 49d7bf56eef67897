-- Version 8: a token may expire. expires_ms is the Unix epoch millisecond from which calls made
-- with it are refused; 0 (every token made before this version) never expires.
ALTER TABLE api_tokens ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT 0;
