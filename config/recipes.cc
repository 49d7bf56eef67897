#include "config/recipes.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/text_prefix.h"
#include "config/connection_options.h"

namespace spheret {
namespace {

using nlohmann::json;

struct Recipe {
  const char* name;
  json common;
  std::vector<std::pair<std::string, json>> per_scale;  // scale -> keys
};

const std::vector<Recipe>& Recipes() {
  static const std::vector<Recipe> recipes = {
      {"paper",
       json{{"max_iters", 50000},
            {"lr_decay_iters", 50000},
            {"warmup_iters", 2000},
            {"decay_lr", true},
            {"block_size", 1024},
            {"batch_size", 16},
            {"gradient_accumulation_steps", 8},
            {"beta1", 0.9},
            {"beta2", 0.95},
            {"weight_decay", 0.1},
            {"grad_clip", 1.0},
            {"dtype", "bfloat16"},
            {"vocab_size", 50304},
            {"seed", 1337}},
       {{"S", json{{"learning_rate", 6e-4}, {"min_lr", 6e-5}}},
        {"M", json{{"learning_rate", 3e-4}, {"min_lr", 3e-5}}},
        {"L", json{{"learning_rate", 2.5e-4}, {"min_lr", 2.5e-5}}}}},
  };
  return recipes;
}

const Recipe* FindRecipe(const std::string& name) {
  for (const Recipe& recipe : Recipes()) {
    if (name == recipe.name) return &recipe;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> RecipeNames() {
  std::vector<std::string> names;
  for (const Recipe& recipe : Recipes()) names.emplace_back(recipe.name);
  return names;
}

std::vector<std::string> RecipeScaleKeys(const std::string& name) {
  std::vector<std::string> keys;
  const Recipe* recipe = FindRecipe(name);
  if (recipe == nullptr || recipe->per_scale.empty()) return keys;
  for (const auto& item : recipe->per_scale.front().second.items()) keys.push_back(item.key());
  return keys;
}

absl::StatusOr<json> RecipeValues(const std::string& name, const std::string& scale,
                                  bool scale_keys_given) {
  const Recipe* recipe = FindRecipe(name);
  if (recipe == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("config key 'recipe' must be one of ",
                                                   absl::StrJoin(RecipeNames(), ", "),
                                                   " (or empty), got \"", TextPrefix(name), "\""));
  }
  json values = recipe->common;
  std::vector<std::string> scales;
  for (const auto& [scale_name, keys] : recipe->per_scale) {
    if (scale_name == scale) {
      values.update(keys);
      return values;
    }
    scales.push_back(scale_name);
  }
  if (scale_keys_given) return values;
  return absl::InvalidArgumentError(absl::StrCat(
      "config key 'recipe' ", name, " sets ", absl::StrJoin(RecipeScaleKeys(name), " and "),
      " per scale for ", absl::StrJoin(scales, ", "), " only; scale \"", scale,
      "\" needs them set explicitly"));
}

json MethodDefaults(const std::string& method) {
  if (ParseMethod(method) == Method::kNgpt) {
    return json{
        {"weight_decay", 0.0}, {"warmup_iters", 0}, {"bias", false}, {"pos_encoding", "rope"}};
  }
  return json::object();
}

}  // namespace spheret
