#include "server/sweep/trial_depth.h"

#include "config/trial_config.h"

namespace spheret {

int64_t TrialDepth(const TrialConfig& config) {
  absl::StatusOr<TrainConfig> resolved = config.Resolve();
  return resolved.ok() ? resolved->n_layer * resolved->loops : 0;
}

}  // namespace spheret
