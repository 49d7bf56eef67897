#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/store/migrations.h"
#include "server/store/packed_points.h"

namespace spheret::store {
namespace {

// SQL function spheret_json_real(x) of migration 0011: the JSON text of a stored REAL, as the
// writer packs values (std::to_chars, exact; SQLite's own printf is not for every double), NULL
// as null, infinities as SQLite's JSON writes them (9e999, which reads back as infinity).
void JsonReal(sqlite3_context* context, int, sqlite3_value** args) {
  std::string text;
  if (sqlite3_value_type(args[0]) == SQLITE_NULL) {
    text = "null";
  } else {
    const double value = sqlite3_value_double(args[0]);
    if (std::isinf(value)) {
      text = value > 0 ? "9e999" : "-9e999";
    } else {
      AppendValue(value, &text);
    }
  }
  sqlite3_result_text(context, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

}  // namespace

absl::Status Migrate(Database& db, int target) {
  const int latest = static_cast<int>(Migrations().size());
  if (target < 0) target = latest;
  absl::StatusOr<int64_t> version = db.QueryInt("PRAGMA user_version");
  if (!version.ok()) return version.status();
  if (*version > latest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database '", db.path(), "' has schema version ", *version, " but this spheret knows ",
        latest, ": it was written by a newer spheret; upgrade instead of downgrading"));
  }
  if (sqlite3_create_function_v2(db.raw(), "spheret_json_real", 1,
                                 SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, JsonReal, nullptr,
                                 nullptr, nullptr) != SQLITE_OK) {
    return SqliteError(db.raw(), "registering spheret_json_real for the migrations");
  }
  for (int64_t next = *version; next < target; ++next) {
    const Migration& migration = Migrations()[next];
    absl::Status status = db.Exec("BEGIN IMMEDIATE");
    if (status.ok()) status = db.Exec(migration.sql);
    if (status.ok()) status = db.Exec(absl::StrCat("PRAGMA user_version = ", next + 1));
    if (status.ok()) status = db.Exec("COMMIT");
    if (!status.ok()) {
      db.Exec("ROLLBACK").IgnoreError();
      return absl::Status(status.code(),
                          absl::StrCat("migration ", migration.name, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace spheret::store
