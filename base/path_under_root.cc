#include "base/path_under_root.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;

// `path` made absolute and lexically normal, without a trailing separator.
fs::path Normal(const std::string& path) {
  std::error_code ec;
  fs::path normal = fs::absolute(path, ec).lexically_normal();
  if (ec) normal = fs::path(path).lexically_normal();
  if (!normal.has_filename() && normal.has_relative_path()) normal = normal.parent_path();
  return normal;
}

// Whether `path` is non-empty and every component of `root` begins it (both Normal).
bool Inside(const std::string& path, const std::string& root) {
  if (path.empty()) return false;
  const fs::path normal = Normal(path);
  auto at = normal.begin();
  for (const fs::path& part : Normal(root)) {
    if (at == normal.end() || *at != part) return false;
    ++at;
  }
  return true;
}

absl::Status Outside(absl::string_view what, const std::string& shown, const std::string& path,
                     absl::string_view root_what, const std::string& root) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", shown, " is outside ", root_what, " ",
                                                 root, " (it leads to ", Normal(path).string(),
                                                 "); name a folder under it"));
}

}  // namespace

absl::StatusOr<std::string> ResolveUnderRoot(absl::string_view what, const std::string& path,
                                             absl::string_view root_what, const std::string& root) {
  std::error_code ec;
  if (fs::is_directory(path, ec) && Inside(path, root)) return path;
  const std::string joined = (fs::path(root) / path).string();
  if (Inside(joined, root)) return joined;
  return Outside(what, path, joined, root_what, root);
}

}  // namespace spheret
