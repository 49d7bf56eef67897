#include "base/replacing_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spheret {
namespace {

std::string Errno() { return std::strerror(errno); }

absl::Status Refuse(const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("refusing ", path, ": ", why));
}

// OkStatus when `path` is missing or a regular file; refuses a link or anything else.
absl::Status CheckRegularOrMissing(const std::string& path, bool* exists) {
  struct stat info;
  *exists = lstat(path.c_str(), &info) == 0;
  if (!*exists) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("cannot inspect ", path, ": ", Errno()));
  }
  if (S_ISLNK(info.st_mode)) {
    return Refuse(path,
                  "it is a symbolic link (files are written in place of links, never "
                  "through them: remove it)");
  }
  if (!S_ISREG(info.st_mode)) return Refuse(path, "not a regular file");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReplacingFile> ReplacingFile::Create(const std::string& path, mode_t mode) {
  const std::string temporary = path + ".tmp";
  bool replaces = false, stale = false;
  if (absl::Status checked = CheckRegularOrMissing(path, &replaces); !checked.ok()) return checked;
  if (absl::Status checked = CheckRegularOrMissing(temporary, &stale); !checked.ok())
    return checked;
  if (stale && unlink(temporary.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", temporary, ": ", Errno()));
  }
  const int fd =
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0 && (errno == EEXIST || errno == ELOOP)) {
    return Refuse(temporary, "something took its name while it was being created");
  }
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", temporary, ": ", Errno()));
  return ReplacingFile(path, fd);
}

ReplacingFile::ReplacingFile(ReplacingFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

ReplacingFile::~ReplacingFile() {
  if (fd_ < 0) return;
  close(fd_);
  unlink(Temporary().c_str());
}

absl::Status ReplacingFile::Append(std::string_view bytes) {
  if (fd_ < 0) return absl::FailedPreconditionError(path_ + " is already committed");
  while (!bytes.empty()) {
    const ssize_t n = write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InternalError(absl::StrCat("cannot write ", Temporary(), ": ", Errno()));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status ReplacingFile::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(path_ + " is already committed");
  const int fd = std::exchange(fd_, -1);
  const bool written = fsync(fd) == 0;
  const bool closed = close(fd) == 0;
  if (!written || !closed || std::rename(Temporary().c_str(), path_.c_str()) != 0) {
    const std::string why = Errno();
    unlink(Temporary().c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", why));
  }
  return absl::OkStatus();
}

}  // namespace spheret
