// One trial's configuration as a process holds it: the canonical JSON text (what a sweep expands
// into, the store keeps, the protos carry as `config_json` and the trainer reads as config.json)
// parsed once, where it enters the process, into a view that the coordinator, the CLI and the
// reports read knobs from instead of parsing the text again.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "config/train_config.h"

namespace spheret {

class TrialConfig {
 public:
  // A config with no keys (the text "").
  TrialConfig();
  // Parses `canonical_json`. Never fails: a text that is not a JSON object (a config this
  // version cannot read) gives a view with no keys; is_object() tells the two apart.
  explicit TrialConfig(std::string canonical_json);
  // Copies share the parsed config. There are no moves (a move copies), so no TrialConfig is ever
  // left without one.
  TrialConfig(const TrialConfig&) = default;
  TrialConfig& operator=(const TrialConfig&) = default;

  // The text as given.
  const std::string& text() const { return parsed_->text; }
  // Whether the text is a JSON object.
  bool is_object() const { return parsed_->is_object; }
  // The config's keys and values; an empty object when !is_object().
  const nlohmann::json& object() const;
  // The value of `key`, or nullptr when the config does not set it.
  const nlohmann::json* Find(std::string_view key) const;
  // KnobValueText of `key`'s value (`0.5`, `p_spheret`, `1337`), or "" when it is not set.
  std::string KnobText(std::string_view key) const;
  // The configuration the trainer runs, resolved as spheret-lm resolves it (ApplyConfigJson,
  // then FinalizeConfig: recipe, scale preset, checks); InvalidArgument naming the key when this
  // version refuses it, or when the text is not a JSON object.
  absl::StatusOr<TrainConfig> Resolve() const;

  // The trainer's road in (a run's config.json, `--config`): applies the config to `config` as
  // ApplyConfigJson does; InvalidArgument "not valid JSON", or naming the key this version
  // refuses (or what the text is when it is not an object).
  absl::Status ApplyTo(TrainConfig* config) const;

 private:
  struct Parsed {
    std::string text;
    nlohmann::json value;  // the parsed text; discarded when it is not valid JSON
    bool is_object = false;
  };
  // Shared by copies, so that a copy costs a reference count, not a JSON tree: a config never
  // changes once parsed, and a report holds one per series of every trial (tens of thousands).
  std::shared_ptr<const Parsed> parsed_;
};

// TrialConfig::Resolve for a config object built in memory (a derived evaluation or confirm
// config, a report's known keys): the configuration the trainer would run, or InvalidArgument
// naming the key this version refuses; no text is written out and parsed again.
absl::StatusOr<TrainConfig> ResolveConfigObject(const nlohmann::json& object);

}  // namespace spheret
