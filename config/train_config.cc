#include "config/train_config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/text_prefix.h"
#include "config/connection_script.h"
#include "config/knob_text.h"
#include "config/recipes.h"
#include "config/scale_presets.h"
#include "config/train_config_checks.h"

namespace spheret {
namespace {

using nlohmann::json;

// One config key: how to read it from JSON into the config, and how to write it back.
struct Field {
  const char* key;
  std::function<std::string(const json&, TrainConfig&)> set;
  std::function<json(const TrainConfig&)> get;
};

std::string TypeError(const char* key, const char* type, const json& value) {
  return std::string("config key '") + key + "' must be " + type + ", got " +
         TextPrefix(value.dump(-1, ' ', false, json::error_handler_t::replace));
}

template <typename T, typename Access>
Field Plain(const char* key, Access access) {
  return Field{key,
               [key, access](const json& value, TrainConfig& config) -> std::string {
                 if constexpr (std::is_same_v<T, bool>) {
                   if (!value.is_boolean()) return TypeError(key, "true or false", value);
                 } else if constexpr (std::is_integral_v<T>) {
                   if (!value.is_number_integer()) return TypeError(key, "an integer", value);
                 } else if constexpr (std::is_floating_point_v<T>) {
                   if (!value.is_number()) return TypeError(key, "a number", value);
                 } else {
                   if (!value.is_string()) return TypeError(key, "a string", value);
                 }
                 access(config) = value.get<T>();
                 return "";
               },
               [access](const TrainConfig& config) { return json(access(config)); }};
}

// An enum knob, spelled as in KnobSpellings<E>().
template <typename E, typename Access>
Field Enum(const char* key, Access access) {
  return Field{
      key,
      [=](const json& value, TrainConfig& config) -> std::string {
        std::optional<E> parsed;
        if (value.is_string()) parsed = ParseKnob<E>(value.get<std::string>());
        if (parsed) {
          access(config) = *parsed;
          return "";
        }
        std::string valid;
        for (const auto& entry : KnobSpellings<E>()) {
          valid += (valid.empty() ? "" : ", ") + std::string(entry.first);
        }
        return std::string("config key '") + key + "' must be one of " + valid + ", got " +
               TextPrefix(value.dump(-1, ' ', false, json::error_handler_t::replace));
      },
      [=](const TrainConfig& config) { return json(std::string(KnobId(access(config)))); }};
}

// angle_max: radians, or "none" (the uncapped update, +inf inside).
Field AngleMaxField() {
  return Field{"angle_max",
               [](const json& value, TrainConfig& config) -> std::string {
                 if (value.is_string() && value.get<std::string>() == "none") {
                   config.connection.angle_max = std::numeric_limits<double>::infinity();
                   return "";
                 }
                 if (!value.is_number())
                   return TypeError("angle_max", "a number or \"none\"", value);
                 config.connection.angle_max = value.get<double>();
                 return "";
               },
               [](const TrainConfig& config) {
                 const double angle = config.connection.angle_max;
                 return std::isinf(angle) && angle > 0 ? json("none") : json(angle);
               }};
}

// scalenorm: true or false; written back as given, else as the method's default (ScaleNormOn).
Field ScaleNormField() {
  return Field{"scalenorm",
               [](const json& value, TrainConfig& config) -> std::string {
                 if (!value.is_boolean()) return TypeError("scalenorm", "true or false", value);
                 config.connection.scalenorm = value.get<bool>();
                 return "";
               },
               [](const TrainConfig& config) {
                 return json(config.connection.scalenorm.value_or(ScaleNormOn(config.connection)));
               }};
}

// Accessors are generic lambdas, so one serves the const (get) and mutable (set) config.
#define SPHERET_FIELD(T, path) \
  Plain<T>(                    \
      #path, [](auto& c) -> auto& { return c.path; })
#define SPHERET_ENUM(E, name) \
  Enum<E>(                    \
      #name, [](auto& c) -> auto& { return c.connection.name; })
#define SPHERET_KNOB(T, name) \
  Plain<T>(                   \
      #name, [](auto& c) -> auto& { return c.connection.name; })
#define SPHERET_MODEL_ENUM(E, name) \
  Enum<E>(                          \
      #name, [](auto& c) -> auto& { return c.name; })

// The keys of the related methods (docs/methods.md §3), the Jacobians', pos_encoding and the
// scripted connection's.
std::vector<Field> RelatedMethodFields() {
  // clang-format off
  return {
      SPHERET_KNOB(double, ngpt_alpha_init),    SPHERET_FIELD(int64_t, loops),
      SPHERET_FIELD(bool, per_loop_loss),       SPHERET_FIELD(std::string, loop_loss_weights),
      SPHERET_FIELD(std::string, readout),      SPHERET_FIELD(double, norm_penalty),
      SPHERET_FIELD(double, gate_temp_start),   SPHERET_FIELD(double, gate_temp_end),
      SPHERET_FIELD(int64_t, gate_freeze_step), SPHERET_FIELD(int64_t, jacobian_interval),
      SPHERET_FIELD(int64_t, jacobian_iters),   SPHERET_ENUM(AutoNormMode, autonorm_mode),
      SPHERET_MODEL_ENUM(PosEncoding, pos_encoding),
      SPHERET_MODEL_ENUM(InterLoopNorm, inter_loop_norm),
      // method scripted (config/connection_script.h)
      Plain<std::string>("connection", [](auto& c) -> auto& { return c.connection_file; }),
      SPHERET_FIELD(std::string, connection_sha256),
      SPHERET_FIELD(std::string, connection_script)};
  // clang-format on
}

// The data, the model and its deep connection, in the order config.json lists them.
std::vector<Field> ModelFields() {
  return {
      SPHERET_FIELD(std::string, dataset),
      SPHERET_FIELD(std::string, data_root),
      SPHERET_FIELD(std::string, scale),
      SPHERET_FIELD(std::string, recipe),
      SPHERET_FIELD(int64_t, vocab_size),
      SPHERET_FIELD(int64_t, n_layer),
      SPHERET_FIELD(int64_t, n_head),
      SPHERET_FIELD(int64_t, n_embd),
      SPHERET_FIELD(int64_t, block_size),
      SPHERET_FIELD(double, dropout),
      SPHERET_FIELD(bool, bias),
      SPHERET_ENUM(Method, method),
      SPHERET_KNOB(double, p),
      AngleMaxField(),
      SPHERET_ENUM(Decay, decay),
      SPHERET_ENUM(DecayIndex, decay_index),
      SPHERET_ENUM(StepParam, step_param),
      SPHERET_ENUM(RadiusParam, radius_param),
      SPHERET_ENUM(NormKind, inner_norm),
      SPHERET_ENUM(NormKind, final_norm),
      ScaleNormField(),
      SPHERET_KNOB(bool, fused),
      SPHERET_FIELD(bool, fused_norm),
      SPHERET_FIELD(bool, fused_attention),
      SPHERET_FIELD(bool, fused_mlp),
  };
}

// The optimizer, the schedule, evaluation, logging, checkpoints and the run's placement.
std::vector<Field> TrainingFields() {
  return {
      SPHERET_FIELD(double, learning_rate),   SPHERET_FIELD(double, min_lr),
      SPHERET_FIELD(int64_t, warmup_iters),   SPHERET_FIELD(int64_t, lr_decay_iters),
      SPHERET_FIELD(int64_t, max_iters),      SPHERET_FIELD(bool, decay_lr),
      SPHERET_FIELD(int64_t, batch_size),     SPHERET_FIELD(int64_t, gradient_accumulation_steps),
      SPHERET_FIELD(int64_t, batch_shards),   SPHERET_FIELD(double, weight_decay),
      SPHERET_FIELD(double, beta1),           SPHERET_FIELD(double, beta2),
      SPHERET_FIELD(double, grad_clip),       SPHERET_FIELD(int64_t, eval_interval),
      SPHERET_FIELD(int64_t, eval_iters),     SPHERET_FIELD(int64_t, log_interval),
      SPHERET_FIELD(int64_t, diag_interval),  SPHERET_FIELD(int64_t, checkpoint_interval),
      SPHERET_FIELD(double, divergence_loss), SPHERET_FIELD(double, spike_margin),
      SPHERET_FIELD(int64_t, seed),           SPHERET_FIELD(std::string, init_from),
      SPHERET_FIELD(std::string, eval_tasks), SPHERET_FIELD(std::string, eval_data),
      SPHERET_FIELD(std::string, eval_every), SPHERET_FIELD(std::string, device),
      SPHERET_FIELD(std::string, dtype),
  };
}

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> all = ModelFields();
    for (Field& field : TrainingFields()) all.push_back(std::move(field));
    for (Field& field : RelatedMethodFields()) all.push_back(std::move(field));
    return all;
  }();
  return fields;
}

#undef SPHERET_FIELD
#undef SPHERET_KNOB
#undef SPHERET_ENUM
#undef SPHERET_MODEL_ENUM

const Field* FindField(const std::string& key) {
  for (const Field& field : Fields()) {
    if (key == field.key) return &field;
  }
  return nullptr;
}

// Applies the `scale` preset to the shape keys not given explicitly.
absl::Status ResolveScale(TrainConfig* config) {
  if (config->scale.empty()) return absl::OkStatus();
  const std::optional<ScalePreset> preset = FindScalePreset(config->scale);
  if (!preset) {
    std::string valid;
    for (const std::string& name : ScalePresetNames()) valid += (valid.empty() ? "" : ", ") + name;
    return absl::InvalidArgumentError("config key 'scale' must be one of " + valid + ", got \"" +
                                      TextPrefix(config->scale) + "\"");
  }
  const auto unless_explicit = [&](const char* key, int64_t preset_value, int64_t* knob) {
    if (config->explicit_keys.count(key) == 0) *knob = preset_value;
  };
  unless_explicit("n_layer", preset->n_layer, &config->n_layer);
  unless_explicit("n_head", preset->n_head, &config->n_head);
  unless_explicit("n_embd", preset->n_embd, &config->n_embd);
  return absl::OkStatus();
}

// Applies the `recipe`'s settings to the keys not given explicitly.
absl::Status ResolveRecipe(TrainConfig* config) {
  if (config->recipe.empty()) return absl::OkStatus();
  bool scale_keys_given = true;
  for (const std::string& key : RecipeScaleKeys(config->recipe)) {
    scale_keys_given = scale_keys_given && config->explicit_keys.count(key) != 0;
  }
  SPHERET_ASSIGN_OR_RETURN(json values,
                           RecipeValues(config->recipe, config->scale, scale_keys_given));
  json missing = json::object();
  for (const auto& [key, value] : values.items()) {
    if (config->explicit_keys.count(key) == 0) missing[key] = value;
  }
  std::set<std::string> explicit_keys = config->explicit_keys;
  SPHERET_RETURN_IF_ERROR(ApplyConfigJson(missing, config));
  config->explicit_keys = std::move(explicit_keys);
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyConfigJson(const json& object, TrainConfig* config) {
  if (!object.is_object()) {
    return absl::InvalidArgumentError(
        "config must be a JSON object, got " +
        TextPrefix(object.dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  for (const auto& [key, value] : object.items()) {
    const Field* field = FindField(key);
    if (field == nullptr)
      return absl::InvalidArgumentError("unknown config key '" + TextPrefix(key) + "'");
    if (std::string error = field->set(value, *config); !error.empty()) {
      return absl::InvalidArgumentError(error);
    }
    config->explicit_keys.insert(key);
  }
  return absl::OkStatus();
}

absl::Status ApplyConfigOverride(const std::string& assignment, TrainConfig* config) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError("override '" + assignment + "' must look like key=value");
  }
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;  // A bare word such as method=geonorm.
  return ApplyConfigJson(json{{key, value}}, config);
}

absl::Status FinalizeConfig(TrainConfig* config) {
  SPHERET_RETURN_IF_ERROR(ApplyMethodDefaults(config));
  SPHERET_RETURN_IF_ERROR(ResolveRecipe(config));
  SPHERET_RETURN_IF_ERROR(ResolveScale(config));
  if (absl::Status error = CheckRanges(*config); !error.ok()) return error;
  if (config->decay_lr && config->lr_decay_iters <= config->warmup_iters) {
    return absl::InvalidArgumentError(
        "config key 'lr_decay_iters' must be > warmup_iters when decay_lr is true");
  }
  if (config->checkpoint_interval == 0) config->checkpoint_interval = config->eval_interval;
  if (config->checkpoint_interval % config->eval_interval != 0) {
    return absl::InvalidArgumentError(
        "config key 'checkpoint_interval' must be a multiple of eval_interval");
  }
  SPHERET_RETURN_IF_ERROR(CheckRuntime(*config));
  SPHERET_RETURN_IF_ERROR(CheckZeroShot(*config));
  SPHERET_RETURN_IF_ERROR(CheckInitFrom(*config));
  SPHERET_RETURN_IF_ERROR(CheckRelatedMethods(config));
  SPHERET_RETURN_IF_ERROR(CheckConnectionScriptKeys(*config));
  config->connection.n_embd = config->n_embd;
  config->connection.n_layer = config->n_layer;
  config->connection.bias = config->bias;
  if (absl::Status error = ValidateConnectionOptions(config->connection); !error.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", error.message()));
  }
  if (config->n_embd % config->n_head != 0) {
    return absl::InvalidArgumentError("config key 'n_embd' (" + std::to_string(config->n_embd) +
                                      ") must be a multiple of "
                                      "n_head (" +
                                      std::to_string(config->n_head) + ")");
  }
  return absl::OkStatus();
}

json ConfigToJson(const TrainConfig& config) {
  json out = json::object();
  for (const Field& field : Fields()) {
    // The script's bytes (up to kMaxConnectionScriptBytes as base64) stay out of logs, checkpoints
    // and reports' effective configs: connection_sha256 names them.
    if (std::string_view(field.key) != "connection_script") out[field.key] = field.get(config);
  }
  return out;
}

json ConfigValue(const TrainConfig& config, const std::string& key) {
  const Field* field = FindField(key);
  return field == nullptr ? json() : field->get(config);
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> keys;
  for (const Field& field : Fields()) keys.emplace_back(field.key);
  return keys;
}

}  // namespace spheret
