// The schema's forward-only migrations (schema/NNNN_name.sql, embedded at build time) and the
// code that applies them, tracked by `PRAGMA user_version` (= the number of migrations applied).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/store/sqlite_db.h"

namespace spheret::store {

struct Migration {
  const char* name;  // file name, e.g. "0001_initial.sql"
  const char* sql;
};

// Every migration in order; migration i (0-based) takes user_version i to i + 1.
const std::vector<Migration>& Migrations();

// Applies the missing migrations, each in its own transaction. FailedPrecondition when the file's
// user_version is newer than this binary knows (it refuses to touch it).
absl::Status Migrate(Database& db, int target = -1);  // -1: the latest

}  // namespace spheret::store
