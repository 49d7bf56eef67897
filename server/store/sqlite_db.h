// A thin RAII layer over the SQLite C API: a connection, prepared statements, Status errors.
// A Database is used by one thread at a time (the store hands connections out).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spheret::store {

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite. Strings are copied.
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);  // NaN and inf are stored as NULL
  Statement& Bind(int index, std::string_view value);
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, const std::string& value) {
    return Bind(index, std::string_view(value));
  }
  Statement& BindNull(int index);

  // Runs one step: true when a row is ready, false when done.
  absl::StatusOr<bool> Step();
  // Runs to completion (for statements without rows) and resets.
  absl::Status Run();
  void Reset();  // resets and clears bindings

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Real(int column) const { return sqlite3_column_double(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::string Text(int column) const;
  // The column's text without a copy: valid until the next Step, Reset or column access.
  std::string_view TextView(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    return text == nullptr ? std::string_view()
                           : std::string_view(reinterpret_cast<const char*>(text),
                                              sqlite3_column_bytes(stmt_, column));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class Database {
 public:
  // Opens (creating when `create`) a database file; `read_only` connections cannot write.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path, bool read_only,
                                                        bool create = true);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  absl::Status Exec(std::string_view sql);
  // A prepared statement, cached per SQL text; valid until the Database closes. Reset on return.
  absl::StatusOr<Statement*> Prepare(const std::string& sql);
  // The single integer of a one-row, one-column query.
  absl::StatusOr<int64_t> QueryInt(const std::string& sql);
  int64_t Changes() const { return sqlite3_changes64(db_); }
  int64_t LastInsertId() const { return sqlite3_last_insert_rowid(db_); }
  // Whether a transaction is open (SQLite ends one by itself on some errors: a full disk, an I/O
  // error, out of memory).
  bool InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }
  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;
};

// An error Status from SQLite's current error on `db`, with context.
absl::Status SqliteError(sqlite3* db, const std::string& context);

}  // namespace spheret::store
