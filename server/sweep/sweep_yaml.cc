#include "server/sweep/sweep_yaml.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/text_prefix.h"
#include "config/train_config.h"
#include "server/sweep/sweep_spec.h"

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
      {"connection_script", "spheret submit sends the file `connection` names"},
  };
  return reserved;
}

// [-+]?[0-9]+, by plain character tests (a regex recursed once per digit of a 100,000-digit value).
bool IsInteger(std::string_view text) {
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

absl::Status CheckTextLength(const YAML::Node& node, const std::string& key,
                             const std::string& text) {
  if (text.size() <= kMaxKnobTextBytes) return absl::OkStatus();
  return ErrorAt(node, key,
                 absl::StrCat("a text of ", text.size(), " bytes, above the limit of ",
                              kMaxKnobTextBytes, " (starts '", TextPrefix(text, 16), "')"));
}

}  // namespace

using nlohmann::json;

absl::Status ErrorAt(const YAML::Node& node, const std::string& key, const std::string& what) {
  // Both may carry the file's text (a key, a value the trainer quotes): bounded here once.
  return absl::InvalidArgumentError(absl::StrCat(
      "line ", node.Mark().line + 1, ": ", TextPrefix(key, 128), ": ", TextPrefix(what, 2048)));
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
  if (IsInteger(text)) {
    errno = 0;
    const long long value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return ErrorAt(node, key, "integer out of range: " + TextPrefix(text));
    return json(static_cast<int64_t>(value));
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (!text.empty() && end == text.c_str() + text.size()) {
    if (!std::isfinite(value)) return ErrorAt(node, key, "must be finite, got " + TextPrefix(text));
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
  if (value->is_string()) {
    if (absl::Status s = CheckTextLength(node, key, value->get<std::string>()); !s.ok()) return s;
  }
  TrainConfig config;
  if (absl::Status refused = ApplyConfigJson(json{{key, *value}}, &config); !refused.ok()) {
    std::string error(refused.message());
    if (error.rfind("unknown config key", 0) == 0) {
      error += " (valid keys: " + absl::StrJoin(ConfigKeys(), ", ") + ")";
    }
    return ErrorAt(node, key, error);
  }
  return ConfigValue(config, key);
}

absl::StatusOr<int64_t> Integer(const YAML::Node& node, const std::string& key, int64_t min,
                                int64_t max) {
  absl::StatusOr<json> value = ScalarToJson(node, key);
  if (!value.ok()) return value.status();
  if (!value->is_number_integer() || value->get<int64_t>() < min || value->get<int64_t>() > max) {
    return ErrorAt(node, key,
                   absl::StrCat("must be an integer in [", min, ", ", max, "], got ",
                                TextPrefix(node.Scalar())));
  }
  return value->get<int64_t>();
}

absl::StatusOr<std::string> Text(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar() || node.Scalar().empty())
    return ErrorAt(node, key, "must be a non-empty string");
  if (absl::Status s = CheckTextLength(node, key, node.Scalar()); !s.ok()) return s;
  return node.Scalar();
}

// YAML allows a key twice (the first wins); in a sweep file that is always a mistake.
absl::Status CheckNoDuplicateKeys(const YAML::Node& map, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& entry : map) {
    if (!seen.insert(entry.first.Scalar()).second) {
      return ErrorAt(
          entry.first,
          absl::StrCat(where, where.empty() ? "" : ".", TextPrefix(entry.first.Scalar())),
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
      return ErrorAt(entry.first, absl::StrCat(where, where.empty() ? "" : ".", TextPrefix(key)),
                     absl::StrCat("unknown key; valid: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace spheret::sweep_yaml
