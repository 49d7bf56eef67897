#include "worker/train/dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/status_macros.h"
#include "worker/train/pickle.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

// spheret's meta.json: {"vocab_size": N, "tokenizer": "byte"}.
absl::Status ReadMetaJson(const std::string& path, DatasetMeta* meta) {
  std::ifstream in(path);
  try {
    const nlohmann::json json = nlohmann::json::parse(in);
    meta->vocab_size = json.at("vocab_size").get<int64_t>();
    meta->tokenizer = json.value("tokenizer", "");
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(path + ": " + e.what());
  }
  return absl::OkStatus();
}

// nanoGPT's meta.pkl: {'vocab_size': N, 'itos': {...}, 'stoi': {...}} (character-level sets).
absl::Status ReadMetaPickle(const std::string& path, DatasetMeta* meta) {
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

}  // namespace

absl::Status ReadDatasetMeta(const std::string& dir, DatasetMeta* meta) {
  std::error_code ec;
  std::string path = dir + "/meta.json";
  absl::Status error;
  if (fs::exists(path, ec)) {
    error = ReadMetaJson(path, meta);
  } else if (path = dir + "/meta.pkl"; fs::exists(path, ec)) {
    error = ReadMetaPickle(path, meta);
  } else {
    *meta = DatasetMeta{50304, ""};  // nanoGPT's default: GPT-2 BPE padded to 64.
    return absl::OkStatus();
  }
  if (error.ok() && (meta->vocab_size < 1 || meta->vocab_size > 65536)) {
    error =
        absl::InvalidArgumentError(path + ": vocab_size must be in [1, 65536] for uint16 tokens");
  }
  return error;
}

TokenFile::TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(mapped_bytes_, other.mapped_bytes_);
  return *this;
}

TokenFile::~TokenFile() { Close(); }

void TokenFile::Close() {
  if (data_ != nullptr) munmap(const_cast<uint16_t*>(data_), mapped_bytes_);
  data_ = nullptr;
  size_ = 0;
  mapped_bytes_ = 0;
}

absl::Status TokenFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::InvalidArgumentError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  absl::Status error;
  if (fstat(fd, &st) != 0) {
    error = absl::InvalidArgumentError("cannot stat " + path + ": " + std::strerror(errno));
  } else if (st.st_size < 4 || st.st_size % 2 != 0) {
    error = absl::InvalidArgumentError(path + " is not a uint16 token file (" +
                                       std::to_string(st.st_size) + " bytes)");
  } else {
    void* mapped = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      error = absl::InvalidArgumentError("cannot map " + path + ": " + std::strerror(errno));
    } else {
      Close();
      data_ = static_cast<const uint16_t*>(mapped);
      mapped_bytes_ = static_cast<size_t>(st.st_size);
      size_ = st.st_size / 2;
    }
  }
  ::close(fd);
  return error;
}

std::pair<torch::Tensor, torch::Tensor> SampleBatch(const TokenFile& tokens, int64_t batch,
                                                    int64_t block, torch::Generator& generator) {
  const torch::Tensor starts = torch::randint(tokens.size() - block, {batch}, generator);
  torch::Tensor x = torch::empty({batch, block}, torch::kLong);
  torch::Tensor y = torch::empty({batch, block}, torch::kLong);
  int64_t* xp = x.data_ptr<int64_t>();
  int64_t* yp = y.data_ptr<int64_t>();
  const int64_t* sp = starts.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const uint16_t* window = tokens.data() + sp[b];
    for (int64_t t = 0; t < block; ++t) {
      xp[b * block + t] = window[t];
      yp[b * block + t] = window[t + 1];
    }
  }
  return {x, y};
}

}  // namespace spheret::train
