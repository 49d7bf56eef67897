#include "server/live_trials.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "config/knob_text.h"
#include "server/sweep/trial_depth.h"
#include "server/trial_configs.h"

namespace spheret {
namespace {

// The gauge labels of a trial: its sweep and the knobs that identify it (a string as it is, any
// other value as its JSON).
metrics::TrialLabels LabelsOf(const TrialRecord& trial, const TrialConfig& config,
                              const std::string& sweep_name) {
  metrics::TrialLabels labels = {{"sweep", sweep_name}, {"trial", std::to_string(trial.trial_id)}};
  for (const char* key : kIdentityKnobs) {
    const nlohmann::json* value = config.Find(key);
    if (value == nullptr) {
      labels[key] = "";
    } else {
      labels[key] = value->is_string() ? value->get<std::string>() : value->dump();
    }
  }
  return labels;
}

}  // namespace

void LiveTrials::TrackRunningLocked(const TrialRecord& trial, const std::string& sweep_name) {
  Trial& live = live_[trial.trial_id];
  const TrialConfig& config = ConfigOf(trial);
  live.labels = LabelsOf(trial, config, sweep_name);
  live.depth = TrialDepth(config);
  if (live.depth == 0) {
    spdlog::warn(
        "trial {}: its config does not resolve to a model depth; its per-layer values "
        "are stored but not exported",
        trial.trial_id);
  }
}

void LiveTrials::TrackRevivedLocked(const Changes& changes) {
  for (const TrialRecord& trial : changes.trials) {
    const SweepRecord* sweep = state_.scheduler.FindSweep(trial.sweep_id);
    if (trial.state != TrialState::kRunning || live_.count(trial.trial_id) != 0 ||
        sweep == nullptr) {
      continue;
    }
    spdlog::info(
        "trial {} attempt {}: its worker came back with it after its lease lapsed; "
        "revived (no failure charged for the lapse)",
        trial.trial_id, trial.attempt);
    TrackRunningLocked(trial, sweep->name);
  }
}

void LiveTrials::ForgetEndedLocked(const std::vector<TrialRecord>& trials) {
  for (const TrialRecord& trial : trials) {
    if (trial.state != TrialState::kRunning && live_.erase(trial.trial_id) > 0) {
      state_.metrics->TrialEnded(trial.trial_id);
    }
  }
}

void LiveTrials::DroppedRows(int64_t trial_id, int64_t depth, int64_t values) {
  state_.metrics->AddDroppedLayerValues(values);
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    auto live = live_.find(trial_id);
    if (live == live_.end() || live->second.dropped_rows_logged) return;
    live->second.dropped_rows_logged = true;  // once per trial: a worker could send many
  }
  spdlog::warn(
      "trial {}: diag rows beyond its model's depth of {} are dropped (neither stored nor "
      "exported; counted in spheret_layer_values_unexported_total{{reason=\"layer\"}})",
      trial_id, depth);
}

}  // namespace spheret
