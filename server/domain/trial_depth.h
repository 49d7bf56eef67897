// The depth of a trial's model, from its stored config: what bounds the layers its per-layer
// values may name (protocol/diag_values.h).
#pragma once

#include <cstdint>
#include <string>

namespace spheret {

// n_layer x loops of the model `config_json` (a trial's stored config) trains, as the trainer's
// own configuration code resolves it (explicit n_layer, else the scale preset's, else the
// default); 0 when the config does not resolve (not JSON, or refused by this version's checks).
int64_t TrialDepth(const std::string& config_json);

}  // namespace spheret
