#include "worker/daemon/private_files.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace spheret::worker {
namespace {

constexpr mode_t kOthersMayWrite = S_IWGRP | S_IWOTH;

std::string Errno() { return std::strerror(errno); }

// "1001 (alice)", or "1001" for a uid without a name.
std::string UserText(uid_t uid) {
  const passwd* entry = getpwuid(uid);
  return entry != nullptr ? absl::StrCat(uid, " (", entry->pw_name, ")") : absl::StrCat(uid);
}

// "0755": the permission bits in octal.
std::string ModeText(mode_t mode) {
  std::string text = "0000";
  for (int i = 3; i >= 0; --i, mode >>= 3) text[i] = static_cast<char>('0' + (mode & 7));
  return text;
}

// Why the folder of stat `info` is not one that only this user may write, or "".
std::string NotPrivate(const struct stat& info) {
  if (!S_ISDIR(info.st_mode)) return "not a folder";
  if (info.st_uid != geteuid() || (info.st_mode & kOthersMayWrite) != 0) {
    return absl::StrCat(
        "owner uid ", UserText(info.st_uid), ", mode ", ModeText(info.st_mode),
        "; the worker runs as uid ", UserText(geteuid()),
        " and needs a folder it owns that its group and others cannot write (chmod go-w "
        "it, or give another folder)");
  }
  return "";
}

std::string PathIn(const Folder& folder, const std::string& name) {
  return (std::filesystem::path(folder.path) / name).string();
}

// Removes an earlier regular file `name` of `folder` (none is fine); refuses anything else.
absl::Status RemoveOldFile(const Folder& folder, const std::string& name) {
  struct stat info;
  if (fstatat(folder.fd.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("cannot inspect ", PathIn(folder, name), ": ", Errno()));
  }
  if (S_ISLNK(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing ", PathIn(folder, name),
                     ": it is a symbolic link (the worker never follows links in its folders)"));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing ", PathIn(folder, name), ": not a regular file"));
  }
  if (unlinkat(folder.fd.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("cannot replace ", PathIn(folder, name), ": ", Errno()));
  }
  return absl::OkStatus();
}

// Creates the new file `name` in `folder` (O_EXCL: nothing may have taken its place).
absl::StatusOr<UniqueFd> CreateNewFile(const Folder& folder, const std::string& name) {
  if (absl::Status removed = RemoveOldFile(folder, name); !removed.ok()) return removed;
  UniqueFd fd(openat(folder.fd.get(), name.c_str(),
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", PathIn(folder, name), ": ", Errno()));
  }
  return fd;
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", Errno()));
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

// Opens the regular file `name` of `folder` to read; NotFound when there is none.
absl::StatusOr<UniqueFd> OpenToRead(const Folder& folder, const std::string& name) {
  UniqueFd fd(openat(folder.fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat info;
  if (fd.get() < 0 && errno == ENOENT) return absl::NotFoundError(PathIn(folder, name));
  if (fd.get() < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing ", PathIn(folder, name), ": it is a symbolic link"));
  }
  if (fd.get() < 0 || fstat(fd.get(), &info) != 0) {
    return absl::InternalError(absl::StrCat("cannot open ", PathIn(folder, name), ": ", Errno()));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing ", PathIn(folder, name), ": not a regular file"));
  }
  return fd;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

absl::Status MakePrivateDir(const std::string& flag, const std::string& dir) {
  const std::filesystem::path path(dir);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(flag, " ", dir, ": ", ec.message()));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", dir, ": cannot create: ", Errno()));
  }
  struct stat info;
  if (stat(dir.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", dir, ": ", Errno()));
  }
  if (const std::string why = NotPrivate(info); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", dir, " is not private: ", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<Folder> OpenRoot(const std::string& root) {
  Folder folder{UniqueFd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)), root};
  if (folder.fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", root, ": ", Errno()));
  }
  return folder;
}

absl::StatusOr<Folder> OpenSubfolder(const Folder& parent, const std::string& name, bool create) {
  Folder folder{UniqueFd(), PathIn(parent, name)};
  if (create && mkdirat(parent.fd.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", folder.path, ": ", Errno()));
  }
  folder.fd = UniqueFd(
      openat(parent.fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (folder.fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(folder.path);
    if (errno == ELOOP || errno == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat("refusing ", folder.path,
                       ": not a folder but a symbolic link or a file (the worker never follows "
                       "links in its folders)"));
    }
    return absl::InternalError(absl::StrCat("cannot open ", folder.path, ": ", Errno()));
  }
  struct stat info;
  if (fstat(folder.fd.get(), &info) != 0) {
    return absl::InternalError(absl::StrCat("cannot inspect ", folder.path, ": ", Errno()));
  }
  if (const std::string why = NotPrivate(info); !why.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("refusing ", folder.path, ": ", why));
  }
  return folder;
}

absl::Status WriteNewFile(const Folder& folder, const std::string& name,
                          std::string_view contents) {
  absl::StatusOr<UniqueFd> fd = CreateNewFile(folder, name);
  if (!fd.ok()) return fd.status();
  return WriteAll(fd->get(), contents, PathIn(folder, name));
}

absl::Status LinkOrCopyFile(const Folder& from, const Folder& to, const std::string& name) {
  absl::StatusOr<UniqueFd> source = OpenToRead(from, name);  // checks it is a regular file
  if (!source.ok()) return source.status();
  if (absl::Status removed = RemoveOldFile(to, name); !removed.ok()) return removed;
  // linkat without AT_SYMLINK_FOLLOW links the entry itself, never what a link points to.
  if (linkat(from.fd.get(), name.c_str(), to.fd.get(), name.c_str(), 0) == 0) {
    return absl::OkStatus();
  }
  return CopyFile(from, to, name);
}

absl::Status CopyFile(const Folder& from, const Folder& to, const std::string& name) {
  absl::StatusOr<UniqueFd> source = OpenToRead(from, name);
  if (!source.ok()) return source.status();
  absl::StatusOr<UniqueFd> target = CreateNewFile(to, name);
  if (!target.ok()) return target.status();
  char buffer[65536];
  for (ssize_t n; (n = read(source->get(), buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InternalError(absl::StrCat("cannot read ", PathIn(from, name), ": ", Errno()));
    absl::Status written = WriteAll(target->get(), std::string_view(buffer, n), PathIn(to, name));
    if (!written.ok()) return written;
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> OpenForAppend(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  return RegularFileOrRefusal(std::move(fd), path, "open");
}

absl::StatusOr<UniqueFd> RegularFileOrRefusal(UniqueFd fd, const std::string& path,
                                              const char* verb) {
  if (fd.get() < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing ", path,
                     ": it is a symbolic link (the worker never follows links in its folders)"));
  }
  struct stat info;
  if (fd.get() < 0 || fstat(fd.get(), &info) != 0) {
    return absl::InternalError(absl::StrCat("cannot ", verb, " ", path, ": ", Errno()));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("refusing ", path, ": not a regular file"));
  }
  return fd;
}

}  // namespace spheret::worker
