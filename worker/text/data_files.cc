#include "worker/text/data_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/text_prefix.h"
#include "worker/text/dataset_identity.h"
#include "worker/text/duplicate_keys.h"
#include "worker/text/pickle.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kChunkTokens = 1 << 20;  // Check reads 2 MiB at a time

// An optional non-negative integer field of meta.json; -1 when absent.
absl::Status ReadCount(const nlohmann::json& json, const char* key, const std::string& path,
                       int64_t* count) {
  *count = -1;
  const auto found = json.find(key);
  if (found == json.end()) return absl::OkStatus();
  if (!found->is_number_integer() || found->get<int64_t>() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": '", key, "' must be a non-negative integer (a token count)"));
  }
  *count = found->get<int64_t>();
  return absl::OkStatus();
}

// A meta file is read whole: InvalidArgument when it is over kMaxMetaBytes.
absl::Status CheckMetaSize(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec) return absl::InvalidArgumentError("cannot read " + path + ": " + ec.message());
  if (bytes > static_cast<uintmax_t>(kMaxMetaBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has ", bytes,
                                                   " bytes, over the limit of ", kMaxMetaBytes,
                                                   " for a data set's meta file"));
  }
  return absl::OkStatus();
}

// spheret's meta.json: {"vocab_size": N, "tokenizer": "byte", "train_tokens": N, ...}.
absl::Status ReadMetaJson(const std::string& path, DatasetMeta* meta) {
  SPHERET_RETURN_IF_ERROR(CheckMetaSize(path));
  std::ifstream in(path);
  nlohmann::json json;
  DuplicateKeyFinder keys;
  try {
    json = nlohmann::json::parse(in, keys.Callback());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not valid JSON (at byte ", e.byte, ")"));
  }
  if (!keys.duplicate().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the key '", keys.duplicate(), "' appears twice in one object (each key once)"));
  }
  if (!json.is_object() || !json.contains("vocab_size") || !json["vocab_size"].is_number_integer())
    return absl::InvalidArgumentError(path + ": no integer 'vocab_size'");
  meta->vocab_size = json["vocab_size"].get<int64_t>();
  const auto tokenizer = json.find("tokenizer");
  if (tokenizer != json.end() && !tokenizer->is_string())
    return absl::InvalidArgumentError(path + ": 'tokenizer' must be a string");
  meta->tokenizer = tokenizer == json.end() ? "" : tokenizer->get<std::string>();
  const auto id = json.find("dataset_id");
  if (id != json.end() && !id->is_string())
    return absl::InvalidArgumentError(path + ": 'dataset_id' must be a string");
  meta->dataset_id = id == json.end() ? "" : id->get<std::string>();
  SPHERET_RETURN_IF_ERROR(ReadCount(json, "train_tokens", path, &meta->train_tokens));
  return ReadCount(json, "val_tokens", path, &meta->val_tokens);
}

// nanoGPT's meta.pkl: {'vocab_size': N, 'itos': {...}, 'stoi': {...}} (character-level sets).
absl::Status ReadMetaPickle(const std::string& path, DatasetMeta* meta) {
  SPHERET_RETURN_IF_ERROR(CheckMetaSize(path));
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json value;
  SPHERET_RETURN_IF_ERROR(Annotate(path, ReadPickle(bytes, &value)));
  if (!value.is_object() || !value.contains("vocab_size") ||
      !value["vocab_size"].is_number_integer()) {
    return absl::InvalidArgumentError(path + ": no integer vocab_size");
  }
  meta->vocab_size = value["vocab_size"].get<int64_t>();
  meta->tokenizer = value.contains("itos") ? "char" : "";
  return absl::OkStatus();
}

// pread until `bytes` are read or the file ends; the bytes read, or -1 (errno set).
int64_t ReadFully(int fd, char* out, int64_t bytes, int64_t offset) {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, out + done, static_cast<size_t>(bytes - done), offset + done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace

absl::Status ReadDatasetMeta(const std::string& dir, DatasetMeta* meta) {
  std::error_code ec;
  std::string path = dir + "/meta.json";
  absl::Status error;
  *meta = DatasetMeta{};
  if (fs::exists(path, ec)) {
    error = ReadMetaJson(path, meta);
  } else if (path = dir + "/meta.pkl"; fs::exists(path, ec)) {
    error = ReadMetaPickle(path, meta);
  } else {
    meta->vocab_size = 50304;  // nanoGPT's default: GPT-2 BPE padded to 64.
    return absl::OkStatus();
  }
  meta->path = path;
  if (error.ok() && (meta->vocab_size < 1 || meta->vocab_size > 65536)) {
    error = absl::InvalidArgumentError(absl::StrCat(
        path, ": vocab_size must be in [1, 65536] for uint16 tokens, got ", meta->vocab_size));
  }
  return error;
}

TokenFile::TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(size_, other.size_);
  std::swap(vocab_size_, other.vocab_size_);
  std::swap(path_, other.path_);
  return *this;
}

TokenFile::~TokenFile() { Close(); }

void TokenFile::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  size_ = 0;
}

absl::Status TokenFile::Open(const std::string& path, int64_t vocab_size) {
  Close();
  // O_NONBLOCK: a FIFO in place of a token file is refused below instead of blocking this open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return absl::InvalidArgumentError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  absl::Status error;
  if (fstat(fd, &st) != 0) {
    error = absl::InvalidArgumentError("cannot stat " + path + ": " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode) || st.st_size < 4 || st.st_size % 2 != 0) {
    error = absl::InvalidArgumentError(absl::StrCat(
        path, " is not a uint16 token file (",
        S_ISREG(st.st_mode) ? absl::StrCat(st.st_size, " bytes") : "not a regular file",
        "; a token file holds whole 2-byte tokens, at least 2)"));
  }
  if (!error.ok()) {
    ::close(fd);
    return error;
  }
  fd_ = fd;
  size_ = st.st_size / 2;
  vocab_size_ = std::clamp<int64_t>(vocab_size, 1, 65536);
  path_ = path;
  return absl::OkStatus();
}

absl::Status TokenFile::Read(int64_t first, int64_t count, uint16_t* out) const {
  const int64_t bytes = count * 2;
  const int64_t got = ReadFully(fd_, reinterpret_cast<char*>(out), bytes, first * 2);
  if (got < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path_, " at token ", first, ": ", std::strerror(errno)));
  }
  if (got < bytes) {
    struct stat st {};
    const int64_t now = fstat(fd_, &st) == 0 ? static_cast<int64_t>(st.st_size) : first * 2 + got;
    return absl::InvalidArgumentError(absl::StrCat(
        path_, " has ", now, " bytes but had ", size_ * 2,
        " when opened: the data set was truncated or rewritten in place while in use"));
  }
  for (int64_t i = 0; i < count; ++i) {
    if (out[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": token id ", out[i], " at token ",
                                                     first + i, " is not below vocab_size ",
                                                     vocab_size_));
    }
  }
  return absl::OkStatus();
}

absl::Status TokenFile::Check(int64_t max_tokens,
                              const std::function<void(int64_t, int64_t)>& progress) const {
  if (max_tokens <= 0) return absl::OkStatus();
  const bool whole = size_ <= max_tokens;
  const int64_t chunk =
      whole ? kChunkTokens : std::min(kChunkTokens, std::max<int64_t>(1, max_tokens / 64));
  const int64_t total = whole ? size_ : std::min(size_, max_tokens);
  const int64_t chunks = whole ? (size_ + chunk - 1) / chunk : std::max<int64_t>(2, total / chunk);
  std::vector<uint16_t> buffer(static_cast<size_t>(chunk));
  int64_t done = 0;
  for (int64_t i = 0; i < chunks; ++i) {
    // Sampled: chunk i starts at i / (chunks - 1) of the way to the last full chunk.
    const int64_t first = whole ? i * chunk : i * (size_ - chunk) / (chunks - 1);
    const int64_t count = std::min(chunk, size_ - first);
    SPHERET_RETURN_IF_ERROR(Read(first, count, buffer.data()));
    done += count;
    if (progress) progress(done, whole ? size_ : chunks * chunk);
  }
  return absl::OkStatus();
}

absl::Status OpenTokenFile(const std::string& dir, const std::string& name, const DatasetMeta& meta,
                           int64_t max_tokens,
                           const std::function<void(int64_t, int64_t)>& progress, TokenFile* file) {
  const std::string path = dir + "/" + name;
  SPHERET_RETURN_IF_ERROR(file->Open(path, meta.vocab_size));
  const int64_t expected = name == "val.bin" ? meta.val_tokens : meta.train_tokens;
  if (expected >= 0 && file->size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " has ", file->size(), " tokens but ", meta.path, " says ", expected,
                     ": the data set was changed or is being prepared again"));
  }
  const absl::Status checked = file->Check(max_tokens, progress);
  if (checked.ok() || meta.path.empty()) return checked;
  return absl::InvalidArgumentError(absl::StrCat(checked.message(), " (of ", meta.path, ")"));
}

absl::Status CheckDataset(const std::string& dir,
                          const std::function<void(const std::string&, int64_t, int64_t)>& progress,
                          DatasetMeta* meta) {
  SPHERET_RETURN_IF_ERROR(ReadDatasetMeta(dir, meta));
  TokenFile files[2];
  for (int i = 0; i < 2; ++i) {
    const std::string name = i == 0 ? "train.bin" : "val.bin", path = dir + "/" + name;
    SPHERET_RETURN_IF_ERROR(OpenTokenFile(
        dir, name, *meta, std::numeric_limits<int64_t>::max(),
        [&](int64_t done, int64_t total) {
          if (progress) progress(path, done, total);
        },
        &files[i]));
  }
  if (meta->dataset_id.empty()) return absl::OkStatus();  // prepared before identities
  std::string id;
  SPHERET_RETURN_IF_ERROR(
      ComputeDatasetId(files[0], files[1], meta->vocab_size, meta->tokenizer, &id));
  if (id == meta->dataset_id) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(meta->path, ": 'dataset_id' is ", TextPrefix(meta->dataset_id),
                   " but train.bin and val.bin are ", id,
                   ": they were changed after prepare wrote them (prepare the data set again)"));
}

}  // namespace spheret::train
