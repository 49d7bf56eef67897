// The states of a trial and of a sweep, and their names: as stored in SQLite, sent over the wire
// (proto spheret.v1.TrialState without its TRIAL_STATE_ prefix), shown by the CLI and exported as
// spheret_trials{state=...}. Code compares states as these values, never as text;
// scripts/check_layout.py (rule 7) counts the files that spell a state's name instead.
#pragma once

#include <optional>
#include <string_view>

namespace spheret {

// kPruned: stopped by the sweep's search (ASHA) at a rung; terminal, not a failure, not retried.
enum class TrialState { kPending, kRunning, kSucceeded, kFailed, kDiverged, kCancelled, kPruned };

// Every trial state, in this order (tables, metrics and gauges list them so).
inline constexpr TrialState kTrialStates[] = {
    TrialState::kPending,  TrialState::kRunning,   TrialState::kSucceeded, TrialState::kFailed,
    TrialState::kDiverged, TrialState::kCancelled, TrialState::kPruned};

// "PENDING", "RUNNING", ... as stored in SQL and shown to users; "UNKNOWN" for no state.
const char* TrialStateName(TrialState state);
std::optional<TrialState> ParseTrialState(std::string_view name);
// Whether `name` is the name of `state` (a state read as text from a reply or a file).
inline bool IsTrialState(std::string_view name, TrialState state) {
  return name == TrialStateName(state);
}
bool IsTerminal(TrialState state);

enum class SweepState { kActive, kDone, kCancelled };
const char* SweepStateName(SweepState state);
std::optional<SweepState> ParseSweepState(std::string_view name);

}  // namespace spheret
