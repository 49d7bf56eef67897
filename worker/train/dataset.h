// Token data sets in nanoGPT's format: `train.bin` and `val.bin` hold raw little-endian uint16
// token ids; `meta.json` holds {"vocab_size": N, "tokenizer": "byte"}.
//
// worker/train/prepare.h writes such folders from text. TokenFile maps a .bin file read-only;
// SampleBatch draws random windows as nanoGPT's get_batch.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace spheret::train {

struct DatasetMeta {
  int64_t vocab_size = 0;
  std::string tokenizer;  // "byte", "char" (meta.pkl), or "" without meta (GPT-2 BPE ids).
};
// Reads <dir>/meta.json, else nanoGPT's <dir>/meta.pkl (tokenizer "char"); a folder with neither
// gets GPT-2's vocabulary (50304, padded as nanoGPT).
absl::Status ReadDatasetMeta(const std::string& dir, DatasetMeta* meta);

// A read-only memory map of a uint16 token file. Movable, not copyable.
class TokenFile {
 public:
  TokenFile() = default;
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  // InvalidArgument naming `path` and the cause when it cannot be opened.
  absl::Status Open(const std::string& path);
  int64_t size() const { return size_; }
  const uint16_t* data() const { return data_; }

 private:
  void Close();
  const uint16_t* data_ = nullptr;
  int64_t size_ = 0;
  size_t mapped_bytes_ = 0;
};

// x, y: (batch, block) int64, y = x shifted by one token, windows starting at uniform random
// offsets in [0, size - block) drawn from `generator`. Precondition: tokens.size() > block.
std::pair<torch::Tensor, torch::Tensor> SampleBatch(const TokenFile& tokens, int64_t batch,
                                                    int64_t block, torch::Generator& generator);

}  // namespace spheret::train
