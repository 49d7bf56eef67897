#include "config/scale_presets.h"

#include <utility>

namespace spheret {
namespace {

// Smallest first: the CPU-sized presets, then the paper's S, M and L (Appendix B).
const std::pair<const char*, ScalePreset> kPresets[] = {
    {"xs", {4, 4, 128}},  {"s-cpu", {6, 6, 192}}, {"d12-cpu", {12, 4, 128}},
    {"S", {12, 12, 768}}, {"M", {24, 16, 1024}},  {"L", {36, 20, 1280}},
};

}  // namespace

std::optional<ScalePreset> FindScalePreset(const std::string& name) {
  for (const auto& [preset_name, preset] : kPresets) {
    if (name == preset_name) return preset;
  }
  return std::nullopt;
}

std::vector<std::string> ScalePresetNames() {
  std::vector<std::string> names;
  for (const auto& entry : kPresets) names.emplace_back(entry.first);
  return names;
}

}  // namespace spheret
