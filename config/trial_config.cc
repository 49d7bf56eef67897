#include "config/trial_config.h"

#include <utility>

#include "config/knob_text.h"

namespace spheret {

TrialConfig::TrialConfig() = default;

TrialConfig::TrialConfig(std::string canonical_json) : text_(std::move(canonical_json)) {
  value_ = nlohmann::json::parse(text_, nullptr, /*allow_exceptions=*/false);
  is_object_ = value_.is_object();
}

const nlohmann::json& TrialConfig::object() const {
  static const nlohmann::json* const empty = new nlohmann::json(nlohmann::json::object());
  return is_object_ ? value_ : *empty;
}

const nlohmann::json* TrialConfig::Find(std::string_view key) const {
  const nlohmann::json& object = this->object();
  auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

std::string TrialConfig::KnobText(std::string_view key) const {
  const nlohmann::json* value = Find(key);
  return value == nullptr ? "" : KnobValueText(*value);
}

absl::StatusOr<TrainConfig> TrialConfig::Resolve() const {
  if (!is_object_) return absl::InvalidArgumentError("the trial's config is not a JSON object");
  return ResolveConfigObject(value_);
}

absl::StatusOr<TrainConfig> ResolveConfigObject(const nlohmann::json& object) {
  if (!object.is_object())
    return absl::InvalidArgumentError("the trial's config is not a JSON object");
  TrainConfig resolved;
  if (absl::Status status = ApplyConfigJson(object, &resolved); !status.ok()) return status;
  if (absl::Status status = FinalizeConfig(&resolved); !status.ok()) return status;
  return resolved;
}

absl::Status TrialConfig::ApplyTo(TrainConfig* config) const {
  if (value_.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return ApplyConfigJson(value_, config);  // names what the text is when it is not an object
}

}  // namespace spheret
