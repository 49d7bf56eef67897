// Recipes: named sets of training settings a config selects with `recipe` (the paper's Appendix
// B as data). A recipe fills the keys a config does not set itself; explicit keys win. Torch-free:
// the coordinator expands recipes into each trial's stored config at submit time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spheret {

// "paper": "Sphere Retraction Normalizations", Appendix B (Tables 6-7). For every scale: 50,000
// iterations with cosine decay over 50,000 and 2,000 of warmup, sequences of 1,024 tokens, a
// global batch of 128 sequences (16 x 8 accumulation steps), AdamW (0.9, 0.95), weight decay 0.1,
// clipping at 1.0, bf16 autocast, vocabulary 50,304, seed 1337. Per scale the learning rate,
// with min_lr = lr / 10: S 6e-4, M 3e-4, L 2.5e-4 (the shapes are the S/M/L presets').
std::vector<std::string> RecipeNames();

// The keys `recipe` sets for `scale`, as config JSON. InvalidArgument naming the recipe when it
// is unknown, or the scale when the recipe has no per-scale settings for it and
// `scale_keys_given` is false (the config sets every per-scale key itself).
absl::StatusOr<nlohmann::json> RecipeValues(const std::string& recipe, const std::string& scale,
                                            bool scale_keys_given = false);

// The settings a method comes with, for the keys a config does not set (explicit keys win, and
// they win over a recipe): ngpt trains without weight decay and without warmup, with no biases
// and with rotary position embeddings, as nGPT does. An empty object for the other methods.
nlohmann::json MethodDefaults(const std::string& method);

// The keys a recipe sets per scale (learning_rate, min_lr for "paper").
std::vector<std::string> RecipeScaleKeys(const std::string& recipe);

}  // namespace spheret
