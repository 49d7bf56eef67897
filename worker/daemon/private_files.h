// The worker's own folders and the files it makes in them. The work dir (configs, trainer logs,
// the spool) and the checkpoint root must belong to the worker's user and be writable by nobody
// else; below them every folder and file is opened relative to its parent with O_NOFOLLOW, so a
// symbolic link planted in a run folder is refused, never followed. Errors name the path.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace spheret::worker {

// An open file descriptor, closed when destroyed. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  int release();

 private:
  int fd_ = -1;
};

// An open folder and its path (for messages and for the programs that get the path).
struct Folder {
  UniqueFd fd;
  std::string path;
};

// Creates `dir` when missing (its parents as the umask says, itself with mode 0700) and checks
// that it is a folder owned by this process's user that neither its group nor others may write.
// InvalidArgument names `flag`, the folder, its owner and its mode otherwise.
absl::Status MakePrivateDir(const std::string& flag, const std::string& dir);

// Opens the folder `root` (checked by MakePrivateDir; a symbolic link there is followed).
absl::StatusOr<Folder> OpenRoot(const std::string& root);

// Opens the folder `name` in `parent`, creating it with mode 0700 when missing and `create`
// (NotFound when missing otherwise). It must be a real folder (not a symbolic link) owned by this
// user that its group and others cannot write.
absl::StatusOr<Folder> OpenSubfolder(const Folder& parent, const std::string& name, bool create);

// Writes `contents` to a new file `name` in `folder` (mode 0600). A regular file of that name is
// replaced; anything else there (a symbolic link) is refused and left alone.
absl::Status WriteNewFile(const Folder& folder, const std::string& name, std::string_view contents);

// Makes `to`/`name` the regular file `from`/`name`: a hard link, or a copy across file systems. A
// regular file at the destination is replaced; a symbolic link on either side is refused. NotFound
// when `from` has no `name`.
absl::Status LinkOrCopyFile(const Folder& from, const Folder& to, const std::string& name);

// As LinkOrCopyFile, but always a copy (a file the new owner will append to).
absl::Status CopyFile(const Folder& from, const Folder& to, const std::string& name);

// Opens `path` to append to (created with mode 0600 when missing, close-on-exec). A symbolic link
// or anything but a regular file there is refused.
absl::StatusOr<UniqueFd> OpenForAppend(const std::string& path);

// `fd`, just returned by an open of `path` with O_NOFOLLOW (errno still that call's), if it is a
// regular file: FailedPrecondition for a symbolic link or anything else, Internal ("cannot `verb`
// PATH: ...") when the open failed.
absl::StatusOr<UniqueFd> RegularFileOrRefusal(UniqueFd fd, const std::string& path,
                                              const char* verb);

}  // namespace spheret::worker
