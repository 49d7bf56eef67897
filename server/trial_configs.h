// A trial's config as the coordinator holds it: read once, where the trial's record enters the
// coordinator (loaded from the store, or created by a submission), kept on the record
// (TrialRecord::config) and passed on; and the configs derived from a typed one (evaluation jobs,
// confirm trials) built from its object, never by editing its text and parsing it again.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "config/trial_config.h"
#include "server/domain/records.h"

namespace spheret {

// Gives `trial` its typed config (TrialRecord::config) read from its config_json, unless it has
// one: the coordinator's one road from a trial's text to a TrialConfig.
void TypeTrial(TrialRecord* trial);
void TypeTrials(std::vector<TrialRecord>* trials);

// The typed config of a record that came through TypeTrial; a record that did not reads as a
// config with no keys.
const TrialConfig& ConfigOf(const TrialRecord& trial);

// `config`'s object with each key of `set` (an object) set to its value: a derived config,
// written out once (dump()) for the store and the worker. (Proposed as TrialConfig::With.)
nlohmann::json ConfigWith(const TrialConfig& config, const nlohmann::json& set);

}  // namespace spheret
