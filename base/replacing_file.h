// A file written under a temporary name beside its destination and renamed into place when
// whole: a reader never sees half a file, and a failed write leaves the earlier file as it was.
// Neither name is followed if it is a symbolic link: in a folder others can write (an export
// folder under /tmp), a link planted at `PATH.tmp` or `PATH` would otherwise have the write land
// on the link's target.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace spheret {

class ReplacingFile {
 public:
  // Creates `path`.tmp with O_CREAT|O_EXCL|O_NOFOLLOW and `mode` (less the umask); a regular file
  // there (a crashed earlier write) is removed first. FailedPrecondition naming the path when
  // `path` or `path`.tmp is a symbolic link or not a regular file (both left alone), or when
  // something takes the temporary's name between the removal and the creation; Internal naming
  // the path when the disk refuses.
  static absl::StatusOr<ReplacingFile> Create(const std::string& path, mode_t mode = 0666);

  ReplacingFile(ReplacingFile&& other) noexcept;
  ReplacingFile& operator=(ReplacingFile&&) = delete;
  ReplacingFile(const ReplacingFile&) = delete;
  ReplacingFile& operator=(const ReplacingFile&) = delete;
  // Closes and removes the temporary unless Commit succeeded.
  ~ReplacingFile();

  // Appends `bytes` to the temporary. Internal naming the temporary when the write fails.
  absl::Status Append(std::string_view bytes);
  // Flushes and closes the temporary and renames it to `path` (a rename replaces a link planted
  // at `path` since Create, never what it points to). Internal naming the path on failure.
  absl::Status Commit();

  const std::string& path() const { return path_; }

 private:
  ReplacingFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string Temporary() const { return path_ + ".tmp"; }

  std::string path_;
  int fd_ = -1;  // the open temporary; -1 once committed or moved from
};

}  // namespace spheret
