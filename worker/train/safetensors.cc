#include "worker/train/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/replacing_file.h"
#include "base/status_macros.h"
#include "worker/text/duplicate_keys.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid safetensors file: ", why));
}

// The product of `shape` times `element` bytes; -1 when it overflows int64 or a dimension is < 0.
int64_t ShapeBytes(const std::vector<int64_t>& shape, int64_t element) {
  int64_t bytes = element;
  for (const int64_t dim : shape) {
    if (dim < 0 || (dim > 0 && bytes > INT64_MAX / dim)) return -1;
    bytes *= dim;
  }
  return bytes;
}

// One tensor's header entry: dtype, shape and data_offsets, checked against the data's size.
absl::Status ParseEntry(const std::string& path, const std::string& name,
                        const nlohmann::json& value, int64_t data_bytes,
                        SafetensorsFile::Entry* out) {
  SafetensorsFile::Entry& entry = *out;
  const auto dtype = value.find("dtype");
  const auto shape = value.find("shape");
  const auto offsets = value.find("data_offsets");
  if (!value.is_object() || dtype == value.end() || !dtype->is_string() || shape == value.end() ||
      !shape->is_array() || offsets == value.end() || !offsets->is_array() ||
      offsets->size() != 2) {
    return Bad(path, "tensor " + name + " lacks dtype, shape or data_offsets");
  }
  entry.dtype = dtype->get<std::string>();
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned()) return Bad(path, "tensor " + name + " has a bad shape");
    entry.shape.push_back(dim.get<int64_t>());
  }
  if (!(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    return Bad(path, "tensor " + name + " has bad data_offsets");
  entry.begin = (*offsets)[0].get<int64_t>();
  entry.end = (*offsets)[1].get<int64_t>();
  const int64_t element = SafetensorsDtypeBytes(entry.dtype);
  if (element == 0) return Bad(path, "tensor " + name + " has unknown dtype " + entry.dtype);
  if (entry.begin < 0 || entry.begin > entry.end || entry.end > data_bytes ||
      ShapeBytes(entry.shape, element) != entry.end - entry.begin) {
    return Bad(
        path, absl::StrCat("tensor ", name, "'s bytes [", entry.begin, ", ", entry.end,
                           ") do not fit its shape, dtype and the ", data_bytes, " bytes of data"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t SafetensorsDtypeBytes(const std::string& dtype) {
  static const std::map<std::string, int64_t> kBytes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2},  {"U32", 4}, {"U64", 8}};
  const auto found = kBytes.find(dtype);
  return found == kBytes.end() ? 0 : found->second;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorBytes>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorBytes& tensor : tensors) {
    if (SafetensorsDtypeBytes(tensor.dtype) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", tensor.name, " has unknown dtype ", tensor.dtype));
    }
    if (ShapeBytes(tensor.shape, SafetensorsDtypeBytes(tensor.dtype)) != tensor.bytes ||
        (tensor.bytes > 0 && tensor.data == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", tensor.name, " (", tensor.dtype,
                                                     ") has ", tensor.bytes,
                                                     " bytes, not what its shape holds"));
    }
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + tensor.bytes}}};
    offset += tensor.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  SPHERET_ASSIGN_OR_RETURN(ReplacingFile out, ReplacingFile::Create(path));
  const uint64_t length = text.size();
  char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>(length >> (8 * i));
  SPHERET_RETURN_IF_ERROR(out.Append(std::string_view(prefix, 8)));
  SPHERET_RETURN_IF_ERROR(out.Append(text));
  for (const TensorBytes& tensor : tensors) {
    SPHERET_RETURN_IF_ERROR(out.Append(std::string_view(static_cast<const char*>(tensor.data),
                                                        static_cast<size_t>(tensor.bytes))));
  }
  return out.Commit();
}

absl::Status SafetensorsFile::Open(const std::string& path) {
  path_ = path;
  entries_.clear();
  metadata_.clear();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("cannot read " + path + ": " + std::strerror(errno));
  std::error_code ec;
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  unsigned char prefix[8] = {};
  if (ec || size < 8 || !in.read(reinterpret_cast<char*>(prefix), 8)) {
    return Bad(path, "shorter than the 8-byte header length");
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | prefix[i];
  if (length < 2 || length > static_cast<uint64_t>(kMaxSafetensorsHeaderBytes) ||
      length > static_cast<uint64_t>(size - 8)) {
    return Bad(path, absl::StrCat("a header of ", length, " bytes in a file of ", size));
  }
  std::string header(length, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(length)))
    return Bad(path, "the header ends early");
  data_start_ = 8 + static_cast<int64_t>(length);
  return ParseHeader(header, size - data_start_);
}

absl::Status SafetensorsFile::ParseHeader(const std::string& header, int64_t data_bytes) {
  nlohmann::json json;
  DuplicateKeyFinder keys;
  try {
    json = nlohmann::json::parse(header, keys.Callback());
  } catch (const nlohmann::json::parse_error& e) {
    return Bad(path_, absl::StrCat("its header is not JSON (at byte ", e.byte, ")"));
  }
  if (!keys.duplicate().empty()) {
    return Bad(path_, "its header names '" + keys.duplicate() +
                          "' twice in one object (the format forbids duplicate keys)");
  }
  if (!json.is_object()) return Bad(path_, "its header is not a JSON object");
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return Bad(path_, "__metadata__ is not an object");
      for (const auto& [key, text] : value.items())
        if (text.is_string()) metadata_[key] = text.get<std::string>();
      continue;
    }
    Entry entry;
    SPHERET_RETURN_IF_ERROR(ParseEntry(path_, name, value, data_bytes, &entry));
    spans.emplace_back(entry.begin, entry.end);
    entries_[name] = std::move(entry);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) return Bad(path_, "two tensors' bytes overlap");
  }
  return absl::OkStatus();
}

absl::Status SafetensorsFile::Read(const std::string& name, void* out) const {
  const auto found = entries_.find(name);
  if (found == entries_.end()) return absl::NotFoundError(path_ + " has no tensor " + name);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(data_start_ + found->second.begin);
  const int64_t bytes = found->second.end - found->second.begin;
  if (!in || !in.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": tensor ", name, " cannot be read whole (the file changed?)"));
  }
  return absl::OkStatus();
}

}  // namespace spheret::train
