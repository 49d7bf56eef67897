#include "worker/daemon/spool_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace spheret::worker {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Makes a rename or a new file in `path`'s folder durable.
void SyncFolderOf(const std::string& path) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  const int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

// Writes `bytes` to `file` and makes them durable.
absl::Status WriteDurably(FILE* file, const std::string& bytes, const std::string& what) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() || std::fflush(file) != 0 ||
      fsync(fileno(file)) != 0) {
    return Errno(what);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<SpoolItem> ParseSpool(const std::string& bytes, std::string* error) {
  std::vector<SpoolItem> items;
  size_t at = 0;
  while (bytes.size() - at >= 5) {
    const char kind = bytes[at];
    const auto* size = reinterpret_cast<const unsigned char*>(bytes.data() + at + 1);
    const uint32_t length = size[0] | size[1] << 8 | size[2] << 16 | uint32_t(size[3]) << 24;
    if ((kind != 'B' && kind != 'F') || length > kMaxSpoolRecordBytes) {
      *error = absl::StrCat("corrupt record at byte ", at, " (kind ", static_cast<int>(kind),
                            ", length ", length, "); the records after it are dropped");
      return items;
    }
    if (bytes.size() - at - 5 < length) return items;  // a torn last record
    SpoolItem item;
    item.is_finish = kind == 'F';
    const std::string_view payload(bytes.data() + at + 5, length);
    const bool parsed = item.is_finish ? item.finish.ParseFromArray(payload.data(), payload.size())
                                       : item.batch.ParseFromArray(payload.data(), payload.size());
    if (!parsed) {
      *error = absl::StrCat("record at byte ", at,
                            " does not parse; the records after it are "
                            "dropped");
      return items;
    }
    items.push_back(std::move(item));
    at += 5 + length;
  }
  return items;
}

std::string SpoolRecord(const SpoolItem& item) {
  const std::string bytes =
      item.is_finish ? item.finish.SerializeAsString() : item.batch.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(bytes.size());
  std::string record;
  record.reserve(5 + bytes.size());
  record.push_back(item.is_finish ? 'F' : 'B');
  for (int shift = 0; shift < 32; shift += 8) record.push_back(char(length >> shift & 0xff));
  return record + bytes;
}

SpoolFile::~SpoolFile() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status SpoolFile::Open(std::vector<SpoolItem>* items, std::string* error) {
  std::ifstream in(path_, std::ios::binary);
  std::stringstream content;
  if (in) content << in.rdbuf();
  *items = ParseSpool(content.str(), error);
  std::vector<const SpoolItem*> kept;
  for (const SpoolItem& item : *items) kept.push_back(&item);
  return Rewrite(kept);  // drops a torn tail, keeps the rest; opens for appending
}

absl::Status SpoolFile::Append(const SpoolItem& item) {
  if (file_ == nullptr) return absl::FailedPreconditionError("the spool is not open");
  const std::string record = SpoolRecord(item);
  if (absl::Status status = WriteDurably(file_, record, "append to " + path_); !status.ok()) {
    return status;
  }
  bytes_ += static_cast<int64_t>(record.size());
  return absl::OkStatus();
}

absl::Status SpoolFile::Rewrite(const std::vector<const SpoolItem*>& items) {
  const std::string temporary = path_ + ".tmp";
  FILE* out = std::fopen(temporary.c_str(), "wb");
  if (out == nullptr) return Errno("create " + temporary);
  std::string content;
  for (const SpoolItem* item : items) content += SpoolRecord(*item);
  absl::Status written = WriteDurably(out, content, "write " + temporary);
  if (std::fclose(out) != 0 && written.ok()) written = Errno("close " + temporary);
  if (!written.ok()) {
    std::remove(temporary.c_str());
    return written;  // the spool itself is untouched
  }
  if (std::rename(temporary.c_str(), path_.c_str()) != 0) {
    const absl::Status renamed = Errno("rename " + temporary);
    std::remove(temporary.c_str());
    return renamed;
  }
  SyncFolderOf(path_);
  bytes_ = static_cast<int64_t>(content.size());
  return Reopen();
}

absl::Status SpoolFile::Reopen() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = std::fopen(path_.c_str(), "ab");
  return file_ != nullptr ? absl::OkStatus() : Errno("open " + path_);
}

}  // namespace spheret::worker
