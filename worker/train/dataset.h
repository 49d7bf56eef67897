// Token data sets in nanoGPT's format: `train.bin` and `val.bin` hold raw little-endian uint16
// token ids; `meta.json` holds {"vocab_size": N, "tokenizer": "byte"}.
//
// PrepareText turns text files into such a folder, byte-level (vocab 256) or with GPT-2's BPE (an
// end-of-text token after each file, as nanoGPT's openwebtext); the first 90% of the token stream
// is train, the rest val. TokenFile maps a .bin file read-only; SampleBatch draws random windows as
// nanoGPT's get_batch.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace spheret::train {

struct PrepareOptions {
  std::vector<std::string> inputs;  // Text files, or folders whose regular files are read.
  std::string out_dir;              // Created if missing; train.bin, val.bin, meta.json written.
  double val_fraction = 0.1;        // Tail share of the stream used for validation.
  // A folder with GPT-2's encoder.json and vocab.bpe: tokenize with GPT-2 BPE (both files are
  // copied into out_dir). Empty: byte level.
  std::string gpt2_dir;
};

struct PrepareStats {
  int64_t files = 0, train_tokens = 0, val_tokens = 0;
};

// InvalidArgument naming the file that failed.
absl::Status PrepareText(const PrepareOptions& options, PrepareStats* report);

// The text files of a built-in corpus ("fortunes": Debian's fortunes package), sorted; else
// InvalidArgument saying what is missing and how to install it.
absl::Status BuiltinCorpusFiles(const std::string& name, std::vector<std::string>* files);

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
