#include "protocol/diag_values.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "protocol/metric_catalog.h"

namespace spheret::protocol {
namespace {

// `text` for a message: at most 40 characters, anything but printable ASCII as \xNN.
std::string Shown(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    }
  }
  if (text.size() > 40) out += "...";
  return out;
}

std::string LayerError(int64_t layer, std::string_view sublayer) {
  int64_t low = 1, high = kMaxDiagLayer;
  if (sublayer == kModelSublayer) low = high = 0;
  if (sublayer == kDyadicSublayer) high = 2 * kMaxDiagLayer;
  if (layer >= low && layer <= high) return "";
  const std::string range =
      low == high ? "0" : "in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
  return "field 'layer' must be " + range + " for sublayer " + std::string(sublayer) + ", got " +
         std::to_string(layer);
}

}  // namespace

std::string_view DiagFieldReading(std::string_view field) {
  const MetricInfo* info = FindMetric(field);
  return info == nullptr ? "" : info->reading;
}

bool IsDiagSublayer(std::string_view sublayer) {
  return sublayer == kAttnSublayer || sublayer == kMlpSublayer || sublayer == kModelSublayer ||
         sublayer == kDyadicSublayer;
}

bool IsDiagFieldName(std::string_view name) {
  if (name.empty() || name.size() > kMaxDiagFieldLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string DiagRowError(int64_t layer, std::string_view sublayer, const DiagValues& values) {
  if (!IsDiagSublayer(sublayer)) {
    return "field 'sublayer' must be attn, mlp, model or dyadic, got \"" + Shown(sublayer) + "\"";
  }
  if (std::string error = LayerError(layer, sublayer); !error.empty()) return error;
  if (values.size() > kMaxDiagValues) {
    return "field 'values' has " + std::to_string(values.size()) + " fields, at most " +
           std::to_string(kMaxDiagValues);
  }
  std::vector<std::string_view> names;
  for (const auto& [name, value] : values) {
    if (!IsDiagFieldName(name)) {
      return "field 'values' has a field name that is not 1 to " +
             std::to_string(kMaxDiagFieldLength) + " of [a-z0-9_]: \"" + Shown(name) + "\"";
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  const auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice != names.end()) return "field 'values' names '" + std::string(*twice) + "' twice";
  return "";
}

bool DiagRowWithinDepth(int64_t depth, int64_t layer, std::string_view sublayer) {
  if (depth <= 0) return false;
  if (sublayer == kModelSublayer) return layer == 0;
  if (sublayer == kDyadicSublayer) return layer >= 1 && layer <= 2 * depth;
  const bool connection = sublayer == kAttnSublayer || sublayer == kMlpSublayer;
  return connection && layer >= 1 && layer <= depth;
}

}  // namespace spheret::protocol
