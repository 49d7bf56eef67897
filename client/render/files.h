// Writing the CLI's output files (the reports' texts; the figures' in figures.h).
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/status.h"

namespace spheret::client {

// Writes `text` to `path` (replacing it); the error names the file.
absl::Status WriteTextFile(const std::filesystem::path& path, const std::string& text);

}  // namespace spheret::client
