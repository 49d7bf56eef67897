// Model size presets by name. Torch-free: the coordinator validates sweep files with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spheret {

// The size presets: "S", "M", "L" (GPT-2 124M/350M/774M shapes: 12/12/768, 24/16/1024, 36/20/1280)
// and the CPU presets "xs" (4/4/128), "s-cpu" (6/6/192), "d12-cpu" (12/4/128).
struct ScalePreset {
  int64_t n_layer, n_head, n_embd;
};
std::optional<ScalePreset> FindScalePreset(const std::string& name);
// Every preset name, smallest model first (the order tables list scales in).
std::vector<std::string> ScalePresetNames();

}  // namespace spheret
