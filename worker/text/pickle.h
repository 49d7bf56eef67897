// A reader for the Python pickles nanoGPT writes as meta.pkl (protocols 2 to 5): dicts, lists,
// str, int, float, bool and None, decoded into JSON (dict keys that are ints become strings).
// LibTorch's own unpickler reads protocol 2 only. No code is ever executed: an opcode outside
// that set (a class, a global, a reduce) is refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace spheret::train {

// Sets *value, or InvalidArgument naming the unsupported opcode or the damage.
absl::Status ReadPickle(std::string_view bytes, nlohmann::json* value);

}  // namespace spheret::train
