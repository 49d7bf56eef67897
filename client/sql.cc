// `spheret sql`: one SELECT on the coordinator's database, opened read-only, under an authorizer
// that allows reading and nothing else (no writes, PRAGMA, ATTACH or schema changes).
#include <sqlite3.h>
#include <strings.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/report/table.h"
#include "client/run_bounded.h"
#include "client/sql_printf.h"

namespace spheret::client {
namespace {

// Functions a query may not call: fts3_tokenizer('simple') answers the address of a tokenizer
// module in the process's heap (its one-argument form is not covered by
// SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, which only guards the two-argument form).
constexpr const char* kDeniedFunctions[] = {"fts3_tokenizer"};

// `denied` (a std::string*) receives the name of a function refused.
int AllowReadsOnly(void* denied, int action, const char*, const char* function, const char*,
                   const char*) {
  switch (action) {
    case SQLITE_FUNCTION:
      for (const char* name : kDeniedFunctions) {
        if (function != nullptr && strcasecmp(function, name) == 0) {
          *static_cast<std::string*>(denied) = name;
          return SQLITE_DENY;
        }
      }
      return SQLITE_OK;
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    default:
      return SQLITE_DENY;
  }
}

using SteadyClock = std::chrono::steady_clock;

// The bounds of one query. The progress handler runs between VM instructions, and a single
// instruction (s || s, printf, replace, randomblob) can build a value of any size, so the
// deadline alone cannot stop it: the value length bounds each such step, the heap limit the sum.
// clang-format off
constexpr int kMaxValueBytes = 16 << 20;       // SQLITE_LIMIT_LENGTH: one string or blob
constexpr int kMaxQueryBytes = 100'000;        // SQLITE_LIMIT_SQL_LENGTH: the query text
constexpr int kMaxExpressionDepth = 200;       // SQLITE_LIMIT_EXPR_DEPTH
constexpr int64_t kMaxHeapBytes = 512 << 20;   // sqlite3_hard_heap_limit64: SQLite's memory
constexpr size_t kMaxResultBytes = 256 << 20;  // the result's text, held for rendering
constexpr int kProgressSteps = 1000;           // VM instructions between deadline checks
constexpr absl::Duration kKillGrace = absl::Seconds(2);  // past --timeout: the query's process
// clang-format on

absl::Status LimitQuery(sqlite3* db) {
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, kMaxQueryBytes);
  sqlite3_limit(db, SQLITE_LIMIT_EXPR_DEPTH, kMaxExpressionDepth);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  // printf('%.*c', 2000000000, 'x') ran 17 s inside one instruction, then answered ''.
  return BoundPrintf(db, kMaxValueBytes);
}

// A failed step's message, naming the limit that stopped it.
absl::Status StepError(sqlite3* db, int code) {
  switch (code) {
    case SQLITE_TOOBIG:
      return absl::ResourceExhaustedError(
          absl::StrCat("sql: a value grew past ", kMaxValueBytes,
                       " bytes (the length limit of a string or blob); narrow the query"));
    case SQLITE_NOMEM:
      return absl::ResourceExhaustedError(
          absl::StrCat("sql: the query needed more than ", kMaxHeapBytes,
                       " bytes of memory (the limit of spheret sql); narrow the query"));
    default:
      return absl::InternalError(std::string("sql: ") + sqlite3_errmsg(db));
  }
}

// Called by SQLite every kProgressSteps VM steps: non-zero interrupts the statement.
int PastDeadline(void* deadline) {
  return SteadyClock::now() > *static_cast<SteadyClock::time_point*>(deadline) ? 1 : 0;
}

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};

// Every row of `statement` into `table` (at most `max_rows`); returns sqlite3_step's last code.
absl::StatusOr<int> ReadRows(sqlite3_stmt* statement, int max_rows, Table* table) {
  const int columns = sqlite3_column_count(statement);
  for (int i = 0; i < columns; ++i) table->header.push_back(sqlite3_column_name(statement, i));
  table->numeric.assign(columns, true);
  int step;
  size_t bytes = 0;
  while ((step = sqlite3_step(statement)) == SQLITE_ROW) {
    if (static_cast<int>(table->rows.size()) >= max_rows) {
      return absl::ResourceExhaustedError(
          absl::StrCat("sql: more than ", max_rows, " rows; add a LIMIT or --max-rows"));
    }
    std::vector<std::string> row;
    for (int i = 0; i < columns; ++i) {
      const int type = sqlite3_column_type(statement, i);
      if (type == SQLITE_TEXT || type == SQLITE_BLOB) table->numeric[i] = false;
      if (type == SQLITE_FLOAT) {
        row.push_back(ExactNumber(sqlite3_column_double(statement, i)));
      } else {
        const unsigned char* text = sqlite3_column_text(statement, i);
        row.push_back(text == nullptr ? "" : reinterpret_cast<const char*>(text));
      }
      bytes += row.back().size();
    }
    if (bytes > kMaxResultBytes) {
      return absl::ResourceExhaustedError(absl::StrCat("sql: the result is over ", kMaxResultBytes,
                                                       " bytes; add a LIMIT or select less"));
    }
    table->rows.push_back(std::move(row));
  }
  return step;
}

// The one statement of `query`, prepared under the authorizer (which names in `denied` a
// function it refused).
absl::StatusOr<std::unique_ptr<sqlite3_stmt, Closer>> Prepare(sqlite3* db, const std::string& query,
                                                              const std::string& denied) {
  if (query.size() > static_cast<size_t>(kMaxQueryBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sql: the query is ", query.size(), " bytes; the limit is ", kMaxQueryBytes));
  }
  sqlite3_stmt* raw_statement = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db, query.c_str(), -1, &raw_statement, &tail) != SQLITE_OK) {
    std::string message = sqlite3_errmsg(db);
    if (!denied.empty()) {
      message = denied + "() may not be called (it shows memory addresses)";
    } else if (message == "not authorized") {
      message = "only SELECT statements may run (read-only)";
    }
    return absl::InvalidArgumentError("sql: " + message);
  }
  std::unique_ptr<sqlite3_stmt, Closer> statement(raw_statement);
  if (statement == nullptr) return absl::InvalidArgumentError("sql: the query is empty");
  for (; tail != nullptr && *tail != '\0'; ++tail) {
    if (!std::isspace(static_cast<unsigned char>(*tail)) && *tail != ';') {
      return absl::InvalidArgumentError("sql: give one statement only");
    }
  }
  return statement;
}

absl::Status Stopped(double timeout_s) {
  return absl::DeadlineExceededError(absl::StrCat("sql: stopped after ", timeout_s,
                                                  " s (--timeout); narrow the query or raise it"));
}

// The query's result as `format` (run in the child of Sql).
absl::StatusOr<std::string> RunQuery(const SqlOptions& options, Format format) {
  sqlite3* raw = nullptr;
  const int opened = sqlite3_open_v2(options.db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, Closer> db(raw);
  if (opened != SQLITE_OK) {
    return absl::UnavailableError("--db " + options.db + ": " + sqlite3_errmsg(raw));
  }
  sqlite3_busy_timeout(db.get(), 5000);
  if (absl::Status limited = LimitQuery(db.get()); !limited.ok()) return limited;
  sqlite3_hard_heap_limit64(kMaxHeapBytes);
  std::string denied;  // a function the authorizer refused
  sqlite3_set_authorizer(db.get(), AllowReadsOnly, &denied);
  SteadyClock::time_point deadline =
      SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(options.timeout_s));
  sqlite3_progress_handler(db.get(), kProgressSteps, PastDeadline, &deadline);
  absl::StatusOr<std::unique_ptr<sqlite3_stmt, Closer>> statement =
      Prepare(db.get(), options.query, denied);
  if (!statement.ok()) return statement.status();
  Table table;
  absl::StatusOr<int> step = ReadRows(statement->get(), options.max_rows, &table);
  if (!step.ok()) return step.status();
  if (*step == SQLITE_INTERRUPT) return Stopped(options.timeout_s);
  if (*step != SQLITE_DONE) return StepError(db.get(), *step);
  return Render(table, format);
}

}  // namespace

absl::Status Sql(const SqlOptions& options, std::ostream& out) {
  absl::StatusOr<Format> format = ParseFormat(options.format);
  if (!format.ok()) return format.status();
  if (!std::filesystem::exists(options.db)) {
    return absl::NotFoundError("--db " + options.db +
                               ": no such database (the coordinator's --db file; or set "
                               "SPHERET_DB)");
  }
  // The progress handler stops a query at --timeout; the child is killed kKillGrace later, for
  // the single instructions that run on past it (instr() of a 16 MiB text takes hours).
  absl::StatusOr<std::string> result = RunBounded([&] { return RunQuery(options, *format); },
                                                  absl::Seconds(options.timeout_s) + kKillGrace);
  if (absl::IsDeadlineExceeded(result.status())) return Stopped(options.timeout_s);
  if (!result.ok()) return result.status();
  out << *result;
  return absl::OkStatus();
}

}  // namespace spheret::client
