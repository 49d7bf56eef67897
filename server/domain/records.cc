#include "server/domain/records.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "protocol/diag_values.h"

namespace spheret {
namespace {

constexpr std::array<std::pair<TrialState, const char*>, 7> kTrialStateNames = {{
    {TrialState::kPending, "PENDING"},
    {TrialState::kRunning, "RUNNING"},
    {TrialState::kSucceeded, "SUCCEEDED"},
    {TrialState::kFailed, "FAILED"},
    {TrialState::kDiverged, "DIVERGED"},
    {TrialState::kCancelled, "CANCELLED"},
    {TrialState::kPruned, "PRUNED"},
}};

constexpr std::array<std::pair<SweepState, const char*>, 3> kSweepStates = {{
    {SweepState::kActive, "ACTIVE"},
    {SweepState::kDone, "DONE"},
    {SweepState::kCancelled, "CANCELLED"},
}};

constexpr std::array<std::pair<Role, const char*>, 4> kRoleNames = {{
    {Role::kAdmin, "admin"},
    {Role::kSubmit, "submit"},
    {Role::kRead, "read"},
    {Role::kWorker, "worker"},
}};

}  // namespace

const char* TrialStateName(TrialState state) {
  for (const auto& [value, name] : kTrialStateNames) {
    if (value == state) return name;
  }
  return "UNKNOWN";
}

std::optional<TrialState> ParseTrialState(std::string_view name) {
  for (const auto& [value, text] : kTrialStateNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

bool IsTerminal(TrialState state) {
  return state != TrialState::kPending && state != TrialState::kRunning;
}

const char* SweepStateName(SweepState state) {
  for (const auto& [value, name] : kSweepStates) {
    if (value == state) return name;
  }
  return "UNKNOWN";
}

std::optional<SweepState> ParseSweepState(std::string_view name) {
  for (const auto& [value, text] : kSweepStates) {
    if (text == name) return value;
  }
  return std::nullopt;
}

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

bool DiagRowWithinDepth(int64_t depth, int64_t layer, std::string_view sublayer) {
  if (depth <= 0) return false;
  if (sublayer == protocol::kModelSublayer) return layer == 0;
  if (sublayer == protocol::kDyadicSublayer) return layer >= 1 && layer <= 2 * depth;
  const bool connection = sublayer == protocol::kAttnSublayer || sublayer == protocol::kMlpSublayer;
  return connection && layer >= 1 && layer <= depth;
}

}  // namespace spheret
