// Early-return helpers for absl::Status / absl::StatusOr (absl does not ship them), and Annotate.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define SPHERET_CONCAT_INNER(a, b) a##b
#define SPHERET_CONCAT(a, b) SPHERET_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define SPHERET_RETURN_IF_ERROR(expr)                                                         \
  do {                                                                                        \
    if (absl::Status spheret_status_ = (expr); !spheret_status_.ok()) return spheret_status_; \
  } while (0)

// `SPHERET_ASSIGN_OR_RETURN(auto x, F())`: declares x from F()'s value, or returns its Status.
#define SPHERET_ASSIGN_OR_RETURN(lhs, expr) \
  SPHERET_ASSIGN_OR_RETURN_IMPL(SPHERET_CONCAT(spheret_or_, __LINE__), lhs, expr)
#define SPHERET_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = *std::move(tmp)

namespace spheret {

// `status` with "context: " before its message (same code); OK stays OK.
inline absl::Status Annotate(absl::string_view context, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace spheret
