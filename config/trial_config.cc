#include "config/trial_config.h"

#include <utility>

#include "config/knob_text.h"

namespace spheret {

TrialConfig::TrialConfig() {
  static const std::shared_ptr<const Parsed>* const empty =
      new std::shared_ptr<const Parsed>(std::make_shared<const Parsed>());
  parsed_ = *empty;
}

TrialConfig::TrialConfig(std::string canonical_json) {
  auto parsed = std::make_shared<Parsed>();
  parsed->text = std::move(canonical_json);
  parsed->value = nlohmann::json::parse(parsed->text, nullptr, /*allow_exceptions=*/false);
  parsed->is_object = parsed->value.is_object();
  parsed_ = std::move(parsed);
}

const nlohmann::json& TrialConfig::object() const {
  static const nlohmann::json* const empty = new nlohmann::json(nlohmann::json::object());
  return parsed_->is_object ? parsed_->value : *empty;
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
  if (!parsed_->is_object) {
    return absl::InvalidArgumentError("the trial's config is not a JSON object");
  }
  return ResolveConfigObject(parsed_->value);
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
  if (parsed_->value.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return ApplyConfigJson(parsed_->value, config);  // names what the text is when it is not an object
}

}  // namespace spheret
