#include "worker/daemon/spool_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

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

namespace {

// The record at `at` of `bytes` into *item: kFramed when its kind and length are sound, kTorn when
// its length runs past the end, kWhole when its payload also parses. With `strict` (looking for
// the next record after damage) a record counts as whole only when it is exactly what the worker
// writes for what it holds: its payload writes back byte for byte and names a trial and an attempt.
enum class Framing { kBad, kTorn, kFramed, kWhole };
Framing ReadRecord(const std::string& bytes, size_t at, bool strict, SpoolItem* item,
                   uint32_t* length) {
  const char kind = bytes[at];
  const auto* size = reinterpret_cast<const unsigned char*>(bytes.data() + at + 1);
  *length = size[0] | size[1] << 8 | size[2] << 16 | uint32_t(size[3]) << 24;
  if ((kind != 'B' && kind != 'F') || *length > kMaxSpoolRecordBytes) return Framing::kBad;
  if (bytes.size() - at - 5 < *length) return Framing::kTorn;
  *item = SpoolItem();
  item->is_finish = kind == 'F';
  const char* payload = bytes.data() + at + 5;
  google::protobuf::Message& message =
      item->is_finish ? static_cast<google::protobuf::Message&>(item->finish) : item->batch;
  if (!message.ParseFromArray(payload, static_cast<int>(*length))) return Framing::kFramed;
  if (strict && (message.SerializeAsString() != std::string_view(payload, *length) ||
                 item->trial_id() <= 0 || item->attempt() <= 0)) {
    return Framing::kFramed;
  }
  return Framing::kWhole;
}

// The offset of the first whole record (strictly read) after `at`, or npos.
size_t NextRecord(const std::string& bytes, size_t at) {
  SpoolItem item;
  uint32_t length = 0;
  for (size_t next = at + 1; bytes.size() - next >= 5; ++next) {
    if (bytes[next] != 'B' && bytes[next] != 'F') continue;
    // Cheap first: a record here ends where the file does or another record starts.
    const auto* size = reinterpret_cast<const unsigned char*>(bytes.data() + next + 1);
    const size_t end = next + 5 + (size[0] | size[1] << 8 | size[2] << 16 | size_t(size[3]) << 24);
    if (end > bytes.size() || (end < bytes.size() && bytes[end] != 'B' && bytes[end] != 'F')) {
      continue;
    }
    if (ReadRecord(bytes, next, /*strict=*/true, &item, &length) == Framing::kWhole) return next;
  }
  return std::string::npos;
}

}  // namespace

std::vector<SpoolItem> ParseSpool(const std::string& bytes, std::string* error) {
  std::vector<SpoolItem> items;
  int damaged = 0;
  for (size_t at = 0; bytes.size() - at >= 5;) {
    SpoolItem item;
    uint32_t length = 0;
    const Framing framing = ReadRecord(bytes, at, /*strict=*/false, &item, &length);
    if (framing == Framing::kWhole) {
      items.push_back(std::move(item));
      at += 5 + length;
      continue;
    }
    const size_t next = NextRecord(bytes, at);
    if (framing == Framing::kTorn && next == std::string::npos) break;  // a crash mid-append
    if (damaged++ == 0) {
      *error =
          absl::StrCat(framing == Framing::kFramed ? "record at byte " : "corrupt record at byte ",
                       at, " (kind ", static_cast<int>(bytes[at]), ", length ", length, ")",
                       framing == Framing::kFramed ? " does not parse" : "", "; ",
                       next == std::string::npos
                           ? absl::StrCat("the ", bytes.size() - at, " bytes from it on")
                           : absl::StrCat(next - at, " bytes up to the record at byte ", next),
                       " are skipped");
    }
    if (next == std::string::npos) break;
    at = next;
  }
  if (damaged > 1) absl::StrAppend(error, " (", damaged, " damaged places in all)");
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
  // Mode 0600 whatever the umask (and not through a link): the spool holds the trials' configs.
  const int fd =
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  FILE* out = fd >= 0 && fchmod(fd, 0600) == 0 ? fdopen(fd, "wb") : nullptr;
  if (out == nullptr) {
    const absl::Status error = Errno("create " + temporary);
    if (fd >= 0) close(fd);
    return error;
  }
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
