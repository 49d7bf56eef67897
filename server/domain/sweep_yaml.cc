#include "server/domain/sweep_yaml.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/train_config.h"

namespace spheret::sweep_yaml {
namespace {

using nlohmann::json;

// Keys a sweep may not set as knobs, and where they belong instead.
const std::map<std::string, std::string>& ReservedKeys() {
  static const std::map<std::string, std::string> reserved = {
      {"seed", "list seeds under the top-level 'seeds:'"},
      {"dataset", "set it with the top-level 'dataset:'"},
      {"data_root", "the worker sets it (spheret-worker --data-root)"},
      {"device", "the worker sets it from resources.gpus"},
  };
  return reserved;
}

}  // namespace

using nlohmann::json;

absl::Status ErrorAt(const YAML::Node& node, const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("line ", node.Mark().line + 1, ": ", key, ": ", what));
}

// A YAML scalar as JSON: quoted text stays a string; plain text becomes a bool, an integer, a
// finite number or a string, as YAML 1.2's core schema reads it.
absl::StatusOr<json> ScalarToJson(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar())
    return ErrorAt(node, key, "must be a single value (a number, word or bool)");
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return json(text);
  if (text == "true" || text == "True") return json(true);
  if (text == "false" || text == "False") return json(false);
  static const std::regex kInteger("[-+]?[0-9]+");
  if (std::regex_match(text, kInteger)) {
    errno = 0;
    const long long value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return ErrorAt(node, key, "integer out of range: " + text);
    return json(static_cast<int64_t>(value));
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (!text.empty() && end == text.c_str() + text.size()) {
    if (!std::isfinite(value)) return ErrorAt(node, key, "must be finite, got " + text);
    return json(value);
  }
  if (text.empty() || text == "~" || text == "null") return ErrorAt(node, key, "has no value");
  return json(text);
}

// The value as the trainer types it (1 -> 1.0 for a float key, method spelled canonically), or
// the trainer's own message for an unknown key or a bad value.
absl::StatusOr<json> CanonicalKnob(const YAML::Node& node, const std::string& key) {
  if (auto it = ReservedKeys().find(key); it != ReservedKeys().end()) {
    return ErrorAt(node, key, "not a sweep knob: " + it->second);
  }
  absl::StatusOr<json> value = ScalarToJson(node, key);
  if (!value.ok()) return value.status();
  TrainConfig config;
  if (absl::Status refused = ApplyConfigJson(json{{key, *value}}, &config); !refused.ok()) {
    std::string error(refused.message());
    if (error.rfind("unknown config key", 0) == 0) {
      error += " (valid keys: " + absl::StrJoin(ConfigKeys(), ", ") + ")";
    }
    return ErrorAt(node, key, error);
  }
  return ConfigToJson(config).at(key);
}

absl::StatusOr<int64_t> Integer(const YAML::Node& node, const std::string& key, int64_t min,
                                int64_t max) {
  absl::StatusOr<json> value = ScalarToJson(node, key);
  if (!value.ok()) return value.status();
  if (!value->is_number_integer() || value->get<int64_t>() < min || value->get<int64_t>() > max) {
    return ErrorAt(
        node, key,
        absl::StrCat("must be an integer in [", min, ", ", max, "], got ", node.Scalar()));
  }
  return value->get<int64_t>();
}

absl::StatusOr<std::string> Text(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar() || node.Scalar().empty())
    return ErrorAt(node, key, "must be a non-empty string");
  return node.Scalar();
}

// YAML allows a key twice (the first wins); in a sweep file that is always a mistake.
absl::Status CheckNoDuplicateKeys(const YAML::Node& map, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& entry : map) {
    if (!seen.insert(entry.first.Scalar()).second) {
      return ErrorAt(entry.first,
                     absl::StrCat(where, where.empty() ? "" : ".", entry.first.Scalar()),
                     "appears twice");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckKeys(const YAML::Node& map, const std::string& where,
                       const std::set<std::string>& allowed) {
  if (!map.IsMap()) return ErrorAt(map, where, "must be a mapping (key: value)");
  if (absl::Status s = CheckNoDuplicateKeys(map, where); !s.ok()) return s;
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    if (allowed.count(key) == 0) {
      return ErrorAt(entry.first, absl::StrCat(where, where.empty() ? "" : ".", key),
                     absl::StrCat("unknown key; valid: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace spheret::sweep_yaml
