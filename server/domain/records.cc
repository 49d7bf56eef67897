#include "server/domain/records.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "protocol/diag_values.h"

namespace spheret {
namespace {

constexpr std::array<std::pair<Role, const char*>, 4> kRoleNames = {{
    {Role::kAdmin, "admin"},
    {Role::kSubmit, "submit"},
    {Role::kRead, "read"},
    {Role::kWorker, "worker"},
}};

}  // namespace

const char* RoleName(Role role) {
  for (const auto& [value, name] : kRoleNames) {
    if (value == role) return name;
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(std::string_view name) {
  for (const auto& [value, text] : kRoleNames) {
    if (text == name) return value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("role must be admin, submit, read or worker, got '", std::string(name), "'"));
}

}  // namespace spheret
