// The files of a token data set in nanoGPT's format: `train.bin` and `val.bin` hold raw
// little-endian uint16 token ids; `meta.json` holds {"vocab_size": N, "tokenizer": "byte",
// "train_tokens": N, "val_tokens": N} (folders without the counts, or with nanoGPT's meta.pkl,
// still read). No LibTorch: worker/train/dataset.h samples batches from them.
//
// worker/text/prepare.h writes such folders from text. TokenFile reads a .bin file with pread,
// never through a memory map, so a file truncated under a running trainer gives an error, not
// SIGBUS (a file replaced by rename, as prepare does, keeps the old contents for the open file).
// CheckDataset checks a whole folder (`spheret-lm check-data`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace spheret::train {

// meta.json and meta.pkl are read whole: larger ones are refused (nanoGPT's are a few KB).
inline constexpr int64_t kMaxMetaBytes = 16 << 20;
// TokenFile::Open checks the ids of at most this many tokens (whole files up to 32 MiB).
inline constexpr int64_t kOpenCheckTokens = 16 << 20;

struct DatasetMeta {
  int64_t vocab_size = 0;
  std::string tokenizer;  // "byte", "gpt2", "char" (meta.pkl), or "" without meta (GPT-2 ids).
  std::string path;       // the file the values came from ("" without one)
  // The token counts of train.bin and val.bin that prepare wrote; -1 when meta.json has none.
  int64_t train_tokens = -1, val_tokens = -1;
  // The identity prepare computed (worker/text/dataset_identity.h); "" when meta.json has none.
  std::string dataset_id;
};
// Reads <dir>/meta.json, else nanoGPT's <dir>/meta.pkl (tokenizer "char"); a folder with neither
// gets GPT-2's vocabulary (50304, padded as nanoGPT). InvalidArgument names the file and field,
// or the key a meta.json object names twice (worker/text/duplicate_keys.h).
absl::Status ReadDatasetMeta(const std::string& dir, DatasetMeta* meta);

// A uint16 token file open for reading. Movable, not copyable. Reads are thread-safe.
class TokenFile {
 public:
  TokenFile() = default;
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  // Opens a regular file of whole uint16 tokens (at least 2) whose ids must all be below
  // `vocab_size` (1..65536). InvalidArgument naming `path` and the cause when it cannot be opened.
  absl::Status Open(const std::string& path, int64_t vocab_size = 65536);
  int64_t size() const { return size_; }  // tokens, as opened
  const std::string& path() const { return path_; }

  // Reads tokens [first, first + count) (within size()) into `out`. InvalidArgument naming the
  // file when it ended early (truncated since Open) or holds an id >= vocab_size (naming the id
  // and its position).
  absl::Status Read(int64_t first, int64_t count, uint16_t* out) const;
  // Reads and checks (none when max_tokens <= 0) every token when size() <= max_tokens, else about
  // max_tokens of them in evenly spaced chunks that include the first and the last token.
  // `progress` (may be null) gets (tokens checked, tokens to check) after each chunk.
  absl::Status Check(int64_t max_tokens,
                     const std::function<void(int64_t, int64_t)>& progress = nullptr) const;

 private:
  void Close();
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t vocab_size_ = 65536;
  std::string path_;
};

// `spheret-lm check-data`: meta.json (or meta.pkl) readable, train.bin and val.bin whole tokens,
// their counts those meta.json states, every id below vocab_size, their identity the dataset_id
// meta.json states (when it states one; worker/text/dataset_identity.h). `progress` (may be null) gets
// (file, tokens checked, tokens in the file). The first problem found, naming file and value.
absl::Status CheckDataset(const std::string& dir,
                          const std::function<void(const std::string&, int64_t, int64_t)>& progress,
                          DatasetMeta* meta);

// The tokens of <dir>/<name> (train.bin or val.bin) opened with `meta`'s vocab_size, its size
// checked against meta's count, its ids against the vocabulary (Check(max_tokens, progress)).
absl::Status OpenTokenFile(const std::string& dir, const std::string& name, const DatasetMeta& meta,
                           int64_t max_tokens,
                           const std::function<void(int64_t, int64_t)>& progress, TokenFile* file);

}  // namespace spheret::train
