#include "server/trial_configs.h"

#include <memory>
#include <utility>

namespace spheret {

void TypeTrial(TrialRecord* trial) {
  if (trial->config != nullptr) return;
  trial->config = std::make_shared<const TrialConfig>(TrialConfig(trial->config_json));
}

void TypeTrials(std::vector<TrialRecord>* trials) {
  for (TrialRecord& trial : *trials) TypeTrial(&trial);
}

const TrialConfig& ConfigOf(const TrialRecord& trial) {
  static const TrialConfig* const untyped = new TrialConfig();
  return trial.config != nullptr ? *trial.config : *untyped;
}

nlohmann::json ConfigWith(const TrialConfig& config, const nlohmann::json& set) {
  nlohmann::json derived = config.object();
  for (const auto& [key, value] : set.items()) derived[key] = value;
  return derived;
}

}  // namespace spheret
