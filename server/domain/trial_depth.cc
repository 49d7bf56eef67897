#include "server/domain/trial_depth.h"

#include <nlohmann/json.hpp>

#include "config/train_config.h"
#include "protocol/diag_values.h"

namespace spheret {

int64_t TrialDepth(const std::string& config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
  if (!config.is_object()) return 0;
  TrainConfig resolved;
  if (!ApplyConfigJson(config, &resolved).ok() || !FinalizeConfig(&resolved).ok()) return 0;
  return resolved.n_layer * resolved.loops;
}

bool DiagRowWithinDepth(int64_t depth, int64_t layer, std::string_view sublayer) {
  if (depth <= 0) return false;
  if (sublayer == protocol::kModelSublayer) return layer == 0;
  if (sublayer == protocol::kDyadicSublayer) return layer >= 1 && layer <= 2 * depth;
  const bool connection = sublayer == protocol::kAttnSublayer || sublayer == protocol::kMlpSublayer;
  return connection && layer >= 1 && layer <= depth;
}

}  // namespace spheret
