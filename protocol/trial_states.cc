#include "protocol/trial_states.h"

#include <array>
#include <utility>

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

}  // namespace spheret
