// The depth of a trial's model, from its stored config: what bounds the layers its per-layer
// values may name (protocol/diag_values.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spheret {

// n_layer x loops of the model `config_json` (a trial's stored config) trains, as the trainer's
// own configuration code resolves it (explicit n_layer, else the scale preset's, else the
// default); 0 when the config does not resolve (not JSON, or refused by this version's checks).
int64_t TrialDepth(const std::string& config_json);

// Whether a diag row at `layer` of `sublayer` belongs to a model `depth` deep
// (protocol/diag_values.h): attn and mlp layers in [1, depth], model layer 0, dyadic layers in
// [1, 2 depth]; never when `depth` is 0 (unknown). What bounds the per-layer values a trial's
// worker may store and export.
bool DiagRowWithinDepth(int64_t depth, int64_t layer, std::string_view sublayer);

}  // namespace spheret
