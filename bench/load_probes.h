// Probes for bench_coordinator_load that need no coordinator: an HTTP GET on loopback (the
// /metrics scrape as Prometheus does it) and the single-writer SQLite insert rate into a table
// shaped like `scalars` (the floor under the coordinator's ingest rate on this machine).
#pragma once

#include <cstdint>
#include <string>

namespace spheret::bench {

// GETs `path` from 127.0.0.1:`port` (HTTP/1.1, Connection: close) and returns the response's
// size in bytes (headers included), or -1 when the connection or the request failed.
int64_t HttpGet(int port, const std::string& path);

// Inserts `rows` rows into a fresh `scalars`-shaped table (same primary key, WITHOUT ROWID,
// STRICT) of a new database at `path`, WAL mode, `synchronous_full` as the coordinator's store,
// `rows_per_commit` rows per transaction with one prepared statement. Returns rows per second.
double SqliteInsertRate(const std::string& path, bool synchronous_full, int64_t rows,
                        int64_t rows_per_commit);

}  // namespace spheret::bench
