// GPT-2's byte-level BPE tokenizer (encoder.json + vocab.bpe, as OpenAI and nanoGPT ship them).
//
// Text is split by GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
// \s+(?!\S)|\s+, each piece's bytes are mapped to printable characters (bytes_to_unicode) and
// merged by rank. Letters, numbers and spaces are Unicode's \p{L}, \p{N} and White_Space
// (worker/text/unicode_classes.h), so the ids are tiktoken's
// (tests/worker/lm/tiktoken_parity_test.py).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "worker/text/gpt2_pieces.h"

namespace spheret::train {

// Pieces already encoded, reused across Encode calls: natural text repeats its words, so most
// pieces skip the merges. One per thread (not thread-safe); emptied when it holds kMaxPieces.
class BpeCache {
 public:
  static constexpr size_t kMaxPieces = 1 << 18;

 private:
  friend class Gpt2Bpe;
  // Pieces of up to 7 bytes that are at most 2 tokens (most of English), in 16-byte slots: the
  // key packs the bytes and the length, the value the ids (Gpt2Bpe::ShortKey, PackIds).
  absl::flat_hash_map<uint64_t, uint64_t> short_pieces_;
  // The other pieces' token ids.
  absl::flat_hash_map<std::string, absl::InlinedVector<int32_t, 4>> pieces_;
};

class Gpt2Bpe {
 public:
  // Loads encoder.json and vocab.bpe; InvalidArgument names the file and the problem.
  absl::Status Load(const std::string& encoder_json, const std::string& vocab_bpe);

  std::vector<int64_t> Encode(std::string_view text) const;
  // Appends the ids of `text` to *ids, reusing and filling *cache. The uint16_t form needs a
  // vocabulary of at most 65536 ids.
  void Encode(std::string_view text, BpeCache* cache, std::vector<int64_t>* ids) const;
  void Encode(std::string_view text, BpeCache* cache, std::vector<uint16_t>* ids) const;
  std::string Decode(const std::vector<int64_t>& ids) const;
  int64_t vocab_size() const { return static_cast<int64_t>(decoder_.size()); }
  // The id of "<|endoftext|>", or -1 when the vocabulary has none.
  int64_t eot() const { return eot_; }

 private:
  // The symbol ids of `piece` after GPT-2's merges (ids >= vocab_size() are symbols outside the
  // vocabulary, which Encode leaves out).
  std::vector<int32_t> Merge(std::string_view piece) const;
  // The token ids of `piece`: from *cache, else merged and added to it.
  const absl::InlinedVector<int32_t, 4>& PieceIds(std::string_view piece, BpeCache* cache) const;
  // The ids of a piece of up to 7 bytes, packed (PackIds), from or into cache->short_pieces_;
  // false when they are more than two.
  bool ShortPieceIds(std::string_view piece, uint64_t key, BpeCache* cache, uint64_t* ids) const;
  template <typename Id>
  void AppendIds(std::string_view text, BpeCache* cache, std::vector<Id>* ids) const;
  int32_t SymbolId(const std::string& symbol);

  std::unordered_map<std::string, int64_t> encoder_;
  std::vector<std::string> decoder_;
  // Merges by the pair of symbol ids (first << 32 | second): (rank, id of the merged symbol).
  absl::flat_hash_map<uint64_t, std::pair<int, int32_t>> merges_;
  std::unordered_map<std::string, int32_t> extra_symbols_;  // merge symbols not in the vocabulary
  std::array<int32_t, 256> byte_ids_{};                     // each byte's symbol id
  std::array<std::string, 256> byte_to_symbol_;  // UTF-8 of each byte's printable stand-in.
  std::unordered_map<std::string, uint8_t> symbol_to_byte_;
  int64_t eot_ = -1;
};

}  // namespace spheret::train
