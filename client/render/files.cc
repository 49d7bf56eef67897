#include "client/render/files.h"

#include <fstream>

namespace spheret::client {

absl::Status WriteTextFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError("cannot write " + path.string());
  return absl::OkStatus();
}

}  // namespace spheret::client
