// YAML nodes of a sweep file as typed values, with errors that name the line and the key.
// Internal to spheret_domain (sweep_spec.cc reads sweep files with these).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace spheret::sweep_yaml {

// InvalidArgument "line N: KEY: WHAT" at `node` (KEY and WHAT cut to bounded prefixes).
absl::Status ErrorAt(const YAML::Node& node, const std::string& key, const std::string& what);
// A YAML scalar as JSON: quoted text stays a string; plain text becomes a bool, an integer, a
// finite number or a string, as YAML 1.2's core schema reads it.
absl::StatusOr<nlohmann::json> ScalarToJson(const YAML::Node& node, const std::string& key);
// The value as the trainer types `key` (1 -> 1.0 for a float key, method spelled canonically), or
// the trainer's own message for an unknown key, a reserved key or a bad value; a text value
// longer than kMaxKnobTextBytes is refused naming the key.
absl::StatusOr<nlohmann::json> CanonicalKnob(const YAML::Node& node, const std::string& key);
absl::StatusOr<int64_t> Integer(const YAML::Node& node, const std::string& key, int64_t min,
                                int64_t max);
// A non-empty scalar of at most kMaxKnobTextBytes bytes.
absl::StatusOr<std::string> Text(const YAML::Node& node, const std::string& key);
// YAML allows a key twice (the first wins); in a sweep file that is always a mistake.
absl::Status CheckNoDuplicateKeys(const YAML::Node& map, const std::string& where);
// `map` is a mapping without duplicate keys whose keys are all in `allowed`.
absl::Status CheckKeys(const YAML::Node& map, const std::string& where,
                       const std::set<std::string>& allowed);

}  // namespace spheret::sweep_yaml
