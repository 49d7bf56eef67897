// The depth of a trial's model, from its stored config: what bounds the layers its per-layer
// values may name (DiagRowWithinDepth in server/domain/records.h).
#pragma once

#include <cstdint>

namespace spheret {

class TrialConfig;  // config/trial_config.h

// n_layer x loops of the model `config` (a trial's stored config) trains, as the trainer's own
// configuration code resolves it (explicit n_layer, else the scale preset's, else the default);
// 0 when the config does not resolve (not JSON, or refused by this version's checks).
int64_t TrialDepth(const TrialConfig& config);

}  // namespace spheret
