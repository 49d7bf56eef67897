#include "common/records.h"

#include <array>
#include <utility>

namespace spheret {
namespace {

constexpr std::array<std::pair<TrialState, const char*>, 6> kTrialStates = {{
    {TrialState::kPending, "PENDING"},
    {TrialState::kRunning, "RUNNING"},
    {TrialState::kSucceeded, "SUCCEEDED"},
    {TrialState::kFailed, "FAILED"},
    {TrialState::kDiverged, "DIVERGED"},
    {TrialState::kCancelled, "CANCELLED"},
}};

constexpr std::array<std::pair<SweepState, const char*>, 3> kSweepStates = {{
    {SweepState::kActive, "ACTIVE"},
    {SweepState::kDone, "DONE"},
    {SweepState::kCancelled, "CANCELLED"},
}};

}  // namespace

const char* TrialStateName(TrialState state) {
  for (const auto& [value, name] : kTrialStates) {
    if (value == state) return name;
  }
  return "UNKNOWN";
}

std::optional<TrialState> ParseTrialState(std::string_view name) {
  for (const auto& [value, text] : kTrialStates) {
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

}  // namespace spheret
