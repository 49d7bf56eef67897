#include "server/domain/trial_depth.h"

#include <nlohmann/json.hpp>

#include "config/train_config.h"

namespace spheret {

int64_t TrialDepth(const std::string& config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
  if (!config.is_object()) return 0;
  TrainConfig resolved;
  if (!ApplyConfigJson(config, &resolved).ok() || !FinalizeConfig(&resolved).ok()) return 0;
  return resolved.n_layer * resolved.loops;
}

}  // namespace spheret
