#include "client/sql_printf.h"

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace spheret::client {
namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

int64_t AddSaturated(int64_t a, int64_t b) { return a > kSaturated - b ? kSaturated : a + b; }

// A run of digits at `*at` as a number (saturated), moving `*at` past it.
int64_t Digits(std::string_view format, size_t* at) {
  int64_t value = 0;
  for (; *at < format.size() && format[*at] >= '0' && format[*at] <= '9'; ++*at) {
    value = value > (kSaturated - 9) / 10 ? kSaturated : value * 10 + (format[*at] - '0');
  }
  return value;
}

// The reader of a format: conversions one at a time, `*` and conversions taking arguments in
// turn (SQLite's getIntArg: the next argument as an int, 0 past the last).
class FormatReader {
 public:
  FormatReader(std::string_view format, const std::vector<int64_t>& args)
      : format_(format), args_(args) {}

  // The padding of the conversion at at_ (just past its '%'); false at an unknown conversion,
  // where SQLite stops formatting.
  bool Conversion(int64_t* padding) {
    while (at_ < format_.size() && std::strchr("-+ #!0,", format_[at_]) != nullptr) ++at_;
    const int64_t width = Amount();
    int64_t precision = 0;
    if (at_ < format_.size() && format_[at_] == '.') {
      ++at_;
      precision = Amount();
    }
    for (int l = 0; l < 2 && at_ < format_.size() && format_[at_] == 'l'; ++l) ++at_;
    if (at_ >= format_.size()) return false;
    const char type = format_[at_++];
    if (type == '%' || type == 'n') {
      *padding = 0;
      return true;
    }
    if (std::strchr("dsgzqQwcouxXipfeEGr", type) == nullptr) return false;
    ++used_;  // the conversion's own argument
    const bool truncates = std::strchr("szqQw", type) != nullptr;
    *padding = AddSaturated(width, truncates ? 0 : precision);
    return true;
  }
  // The next conversion's start, or npos.
  size_t Next() {
    at_ = format_.find('%', at_);
    if (at_ == std::string_view::npos) return at_;
    return ++at_;
  }

 private:
  // A width or precision: digits, or `*` for the next argument (its magnitude: a negative width
  // left-justifies, a negative precision is read as its absolute value).
  int64_t Amount() {
    if (at_ < format_.size() && format_[at_] == '*') {
      ++at_;
      const int64_t value = used_ < args_.size() ? static_cast<int32_t>(args_[used_]) : 0;
      ++used_;
      return value < 0 ? -value : value;
    }
    return Digits(format_, &at_);
  }

  std::string_view format_;
  const std::vector<int64_t>& args_;
  size_t at_ = 0;
  size_t used_ = 0;
};

// SQLite's own printf on a private connection, one prepared statement per argument count.
struct Delegate {
  sqlite3* db = nullptr;
  int max_value_bytes = 0;
  std::map<int, sqlite3_stmt*> statements;

  ~Delegate() {
    for (auto& [argc, statement] : statements) sqlite3_finalize(statement);
    sqlite3_close_v2(db);
  }
  sqlite3_stmt* Statement(int argc) {
    auto found = statements.find(argc);
    if (found != statements.end()) return found->second;
    std::string query = "SELECT printf(";
    for (int i = 1; i <= argc; ++i) absl::StrAppend(&query, i > 1 ? ", ?" : "?", i);
    query += ")";
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, query.c_str(), -1, &statement, nullptr) != SQLITE_OK) return nullptr;
    return statements[argc] = statement;
  }
};

void ReportError(sqlite3_context* context, int code, sqlite3* db) {
  if (code == SQLITE_NOMEM) return sqlite3_result_error_nomem(context);
  if (code == SQLITE_TOOBIG) return sqlite3_result_error_toobig(context);
  sqlite3_result_error(context, sqlite3_errmsg(db), -1);
  sqlite3_result_error_code(context, code);
}

void BoundedPrintf(sqlite3_context* context, int argc, sqlite3_value** argv) {
  Delegate* delegate = static_cast<std::shared_ptr<Delegate>*>(sqlite3_user_data(context))->get();
  if (argc >= 1 && sqlite3_value_type(argv[0]) != SQLITE_NULL) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
    if (text == nullptr) return sqlite3_result_error_nomem(context);
    std::vector<int64_t> args;
    for (int i = 1; i < argc; ++i) args.push_back(sqlite3_value_int64(argv[i]));
    std::string_view format(text, sqlite3_value_bytes(argv[0]));
    format = format.substr(0, format.find('\0'));  // where SQLite's printf stops
    if (FormatPaddingBytes(format, args) > delegate->max_value_bytes) {
      return sqlite3_result_error_toobig(context);
    }
  }
  sqlite3_stmt* statement = delegate->Statement(argc);
  if (statement == nullptr)
    return ReportError(context, sqlite3_errcode(delegate->db), delegate->db);
  for (int i = 0; i < argc; ++i) sqlite3_bind_value(statement, i + 1, argv[i]);
  const int step = sqlite3_step(statement);
  if (step != SQLITE_ROW) {
    ReportError(context, sqlite3_errcode(delegate->db), delegate->db);
  } else if (sqlite3_column_bytes(statement, 0) > delegate->max_value_bytes) {
    sqlite3_result_error_toobig(context);
  } else {
    sqlite3_result_value(context, sqlite3_column_value(statement, 0));
  }
  sqlite3_reset(statement);
  sqlite3_clear_bindings(statement);
}

void ReleaseDelegate(void* held) { delete static_cast<std::shared_ptr<Delegate>*>(held); }

}  // namespace

int64_t FormatPaddingBytes(std::string_view format, const std::vector<int64_t>& star_args) {
  FormatReader reader(format, star_args);
  int64_t total = 0, padding = 0;
  while (reader.Next() != std::string_view::npos && reader.Conversion(&padding)) {
    total = AddSaturated(total, padding);
  }
  return total;
}

absl::Status BoundPrintf(sqlite3* db, int max_value_bytes) {
  auto delegate = std::make_shared<Delegate>();
  delegate->max_value_bytes = max_value_bytes;
  // Its values are bounded here, after the fact: past its own limit SQLite's printf answers an
  // empty text, not an error (the process's heap limit still holds).
  if (sqlite3_open_v2(":memory:", &delegate->db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("sql: cannot open SQLite's printf: ", sqlite3_errmsg(delegate->db)));
  }
  sqlite3_limit(delegate->db, SQLITE_LIMIT_LENGTH, std::numeric_limits<int>::max());
  for (const char* name : {"printf", "format"}) {
    // Each name holds the delegate until the connection closes (SQLite calls ReleaseDelegate
    // then, and also when the registration fails).
    auto* held = new std::shared_ptr<Delegate>(delegate);
    if (sqlite3_create_function_v2(db, name, -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, held,
                                   BoundedPrintf, nullptr, nullptr, ReleaseDelegate) != SQLITE_OK) {
      return absl::InternalError(
          absl::StrCat("sql: cannot bound ", name, "(): ", sqlite3_errmsg(db)));
    }
  }
  return absl::OkStatus();
}

}  // namespace spheret::client
