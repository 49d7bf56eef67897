#include "bench/load_probes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace spheret::bench {

int64_t HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int64_t bytes = -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buffer[1 << 16];
      bytes = 0;
      for (ssize_t got; (got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) bytes += got;
    }
  }
  ::close(fd);
  return bytes;
}

double SqliteInsertRate(const std::string& path, bool synchronous_full, int64_t rows,
                        int64_t rows_per_commit) {
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
  sqlite3_exec(db, synchronous_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL",
               nullptr, nullptr, nullptr);
  sqlite3_exec(db,
               "CREATE TABLE scalars (trial_id INTEGER NOT NULL, metric_id INTEGER NOT NULL, "
               "step INTEGER NOT NULL, attempt INTEGER NOT NULL, value REAL, wall_ms INTEGER NOT "
               "NULL, superseded INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (trial_id, metric_id, "
               "step, attempt)) STRICT, WITHOUT ROWID",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT INTO scalars(trial_id, metric_id, step, attempt, value, wall_ms) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                     -1, &insert, nullptr);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t row = 0; row < rows;) {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    for (int64_t end = std::min(rows, row + rows_per_commit); row < end; ++row) {
      // 8 trials' streams, 4 metrics each, as the coordinator bench's ingest sends them.
      sqlite3_bind_int64(insert, 1, 1 + row % 8);
      sqlite3_bind_int64(insert, 2, 1 + (row / 8) % 4);
      sqlite3_bind_int64(insert, 3, row / 32);
      sqlite3_bind_int64(insert, 4, 1);
      sqlite3_bind_double(insert, 5, 1.0 / (row + 1));
      sqlite3_bind_int64(insert, 6, 0);
      sqlite3_step(insert);
      sqlite3_reset(insert);
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sqlite3_finalize(insert);
  sqlite3_close(db);
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return static_cast<double>(rows) / seconds;
}

}  // namespace spheret::bench
