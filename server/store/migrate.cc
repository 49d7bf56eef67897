#include "absl/strings/str_cat.h"
#include "server/store/migrations.h"

namespace spheret::store {

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
