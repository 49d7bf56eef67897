// The safetensors format (Hugging Face's `safetensors`): an 8-byte little-endian header length N,
// N bytes of JSON {"__metadata__": {...}, NAME: {"dtype": "F32", "shape": [...],
// "data_offsets": [BEGIN, END]}, ...} padded with spaces, then the tensors' raw little-endian
// bytes, offsets relative to the end of the header. No LibTorch: worker/train/hf_gpt2.h turns
// tensors into these bytes and back.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace spheret::train {

// A header is refused above this size (the format's own readers cap it at 100 MB).
inline constexpr int64_t kMaxSafetensorsHeaderBytes = 100 << 20;

// A tensor to write: `data` (not owned) holds `bytes` bytes, its elements in row-major order.
struct TensorBytes {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  const void* data = nullptr;
  int64_t bytes = 0;
};

// Bytes per element of a safetensors dtype; 0 for a dtype this reader does not know.
int64_t SafetensorsDtypeBytes(const std::string& dtype);

// Writes `tensors` in the order given, with `metadata` as __metadata__ (string values), to
// `path`.tmp, then renames it into place (base/replacing_file.h). InvalidArgument for a tensor
// whose bytes do not match its shape and dtype; FailedPrecondition naming the path when `path` or
// `path`.tmp is a symbolic link (never followed) or not a regular file; Internal naming the path
// when it cannot be written.
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorBytes>& tensors,
                              const std::map<std::string, std::string>& metadata);

// A safetensors file open for reading, its header checked whole before any tensor is read.
class SafetensorsFile {
 public:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    int64_t begin = 0, end = 0;  // byte offsets into the data section
  };

  // InvalidArgument naming `path` and the cause: too short for a header, a header length past
  // the file or the limit, a header that is not a JSON object or names a key twice in one
  // object (the format forbids duplicates; the key is named), a tensor whose dtype is unknown,
  // whose shape is not non-negative integers, whose offsets lie outside the data or disagree
  // with shape and dtype, or whose bytes overlap another's.
  absl::Status Open(const std::string& path);
  const std::map<std::string, Entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }
  // Reads tensor `name`'s bytes (entries().at(name).end - begin of them) into `out`.
  absl::Status Read(const std::string& name, void* out) const;

 private:
  absl::Status ParseHeader(const std::string& header, int64_t data_bytes);
  std::string path_;
  int64_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace spheret::train
