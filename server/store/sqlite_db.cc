#include "server/store/sqlite_db.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace spheret::store {

absl::Status SqliteError(sqlite3* db, const std::string& context) {
  const int code = sqlite3_extended_errcode(db);
  const std::string message =
      absl::StrCat(context, ": ", sqlite3_errmsg(db), " (sqlite ", code, ")");
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
      return absl::UnavailableError(message);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  // NaN and inf are stored as NULL (SQLite itself turns only NaN into NULL).
  if (std::isfinite(value)) {
    sqlite3_bind_double(stmt_, index, value);
  } else {
    sqlite3_bind_null(stmt_, index);
  }
  return *this;
}

Statement& Statement::Bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  absl::Status error = SqliteError(db_, sqlite3_sql(stmt_));
  sqlite3_reset(stmt_);
  return error;
}

absl::Status Statement::Run() {
  absl::StatusOr<bool> row = Step();
  while (row.ok() && *row) row = Step();
  Reset();
  return row.status();
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text == nullptr ? std::string()
                         : std::string(reinterpret_cast<const char*>(text),
                                       sqlite3_column_bytes(stmt_, column));
}

namespace {

// Creates a missing database file with mode 0600 before SQLite does (it would use 0644 less the
// umask), so results and configs are the owner's alone; SQLite gives its -wal and -shm files the
// database file's mode. An existing file keeps its mode. Errors are left to sqlite3_open_v2.
void CreateOwnerOnly(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path, bool read_only,
                                                         bool create) {
  if (!read_only && create) CreateOwnerOnly(path);
  sqlite3* db = nullptr;
  const int flags = (read_only ? SQLITE_OPEN_READONLY
                               : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) |
                    SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    absl::Status error = SqliteError(db, "cannot open");
    sqlite3_close(db);
    return error;
  }
  sqlite3_busy_timeout(db, 10'000);
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Database>(new Database(db, path));
}

Database::~Database() {
  cache_.clear();  // statements finalize before the connection closes
  sqlite3_close(db_);
}

absl::Status Database::Exec(std::string_view sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    sqlite3_free(message);  // SqliteError reads the same message from the connection
    const std::string text(sql.substr(0, 60));
    absl::Status error = SqliteError(db_, "running '" + text + (sql.size() > 60 ? "...'" : "'"));
    return error;
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement*> Database::Prepare(const std::string& sql) {
  auto found = cache_.find(sql);
  if (found != cache_.end()) return found->second.get();
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) !=
      SQLITE_OK) {
    return SqliteError(db_, "preparing " + sql);
  }
  auto statement = std::make_unique<Statement>(db_, stmt);
  Statement* raw = statement.get();
  cache_.emplace(sql, std::move(statement));
  return raw;
}

absl::StatusOr<int64_t> Database::QueryInt(const std::string& sql) {
  absl::StatusOr<Statement*> statement = Prepare(sql);
  if (!statement.ok()) return statement.status();
  absl::StatusOr<bool> row = (*statement)->Step();
  if (!row.ok()) return row.status();
  const int64_t value = *row ? (*statement)->Int(0) : 0;
  (*statement)->Reset();
  return value;
}

}  // namespace spheret::store
