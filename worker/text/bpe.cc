#include "worker/text/bpe.h"

#include <climits>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace spheret::train {
namespace {

std::string Utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// A piece of up to 7 bytes as a word: its bytes in the low 7 bytes (the rest zero) and its length
// in the top one. `end` is where the text ends (8 bytes are loaded at once when they lie within).
uint64_t ShortKey(std::string_view piece, const char* end) {
  uint64_t bytes = 0;
  if (end - piece.data() >= 8) {
    std::memcpy(&bytes, piece.data(), 8);
    bytes &= (uint64_t{1} << (8 * piece.size())) - 1;
  } else {
    std::memcpy(&bytes, piece.data(), piece.size());
  }
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the mask keeps the first bytes");
  return bytes | static_cast<uint64_t>(piece.size()) << 56;
}

// Up to two ids in a word, each plus one in its half: 0 ends the ids.
uint64_t PackId(int32_t id, size_t index) {
  return static_cast<uint64_t>(static_cast<uint32_t>(id) + 1) << (32 * index);
}

}  // namespace

absl::Status Gpt2Bpe::Load(const std::string& encoder_json, const std::string& vocab_bpe) {
  // bytes_to_unicode: printable bytes stand for themselves, the others for 256, 257, ...
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    byte_to_symbol_[b] = Utf8(printable ? char32_t(b) : char32_t(next++));
    symbol_to_byte_[byte_to_symbol_[b]] = static_cast<uint8_t>(b);
  }
  std::ifstream encoder_in(encoder_json);
  if (!encoder_in) return absl::InvalidArgumentError("cannot read " + encoder_json);
  try {
    const nlohmann::json encoder = nlohmann::json::parse(encoder_in);
    for (const auto& [token, id] : encoder.items()) {
      const int64_t index = id.get<int64_t>();
      encoder_[token] = index;
      if (index < 0 || index > INT_MAX)
        return absl::InvalidArgumentError(encoder_json + ": id out of range for " + token);
      if (static_cast<size_t>(index) >= decoder_.size()) decoder_.resize(index + 1);
      decoder_[index] = token;
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(encoder_json + ": " + e.what());
  }
  if (auto it = encoder_.find("<|endoftext|>"); it != encoder_.end()) eot_ = it->second;
  for (int b = 0; b < 256; ++b) byte_ids_[b] = SymbolId(byte_to_symbol_[b]);
  std::ifstream merges_in(vocab_bpe);
  if (!merges_in) return absl::InvalidArgumentError("cannot read " + vocab_bpe);
  std::string line;
  int rank = 0;
  for (int line_number = 1; std::getline(merges_in, line); ++line_number) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(vocab_bpe + ":" + std::to_string(line_number) +
                                        ": a merge must be two symbols");
    }
    const std::string first = line.substr(0, space), second = line.substr(space + 1);
    const uint64_t key =
        static_cast<uint64_t>(SymbolId(first)) << 32 | static_cast<uint32_t>(SymbolId(second));
    merges_[key] = {rank++, SymbolId(first + second)};
  }
  return absl::OkStatus();
}

int32_t Gpt2Bpe::SymbolId(const std::string& symbol) {
  if (auto it = encoder_.find(symbol); it != encoder_.end())
    return static_cast<int32_t>(it->second);
  auto [it, added] =
      extra_symbols_.emplace(symbol, static_cast<int32_t>(decoder_.size() + extra_symbols_.size()));
  return it->second;
}

std::vector<int32_t> Gpt2Bpe::Merge(std::string_view piece) const {
  std::vector<int32_t> word;
  word.reserve(piece.size());
  for (unsigned char byte : piece) word.push_back(byte_ids_[byte]);
  std::vector<int32_t> merged;
  while (word.size() > 1) {
    int best = INT_MAX;
    int32_t first = 0, second = 0, into = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it =
          merges_.find(static_cast<uint64_t>(word[i]) << 32 | static_cast<uint32_t>(word[i + 1]));
      if (it != merges_.end() && it->second.first < best) {
        best = it->second.first;
        first = word[i], second = word[i + 1], into = it->second.second;
      }
    }
    if (best == INT_MAX) break;
    merged.clear();
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(into);
        ++i;
      } else {
        merged.push_back(word[i]);
      }
    }
    word.swap(merged);
  }
  return word;
}

const absl::InlinedVector<int32_t, 4>& Gpt2Bpe::PieceIds(std::string_view piece,
                                                         BpeCache* cache) const {
  const absl::string_view key(piece.data(), piece.size());
  if (auto found = cache->pieces_.find(key); found != cache->pieces_.end()) return found->second;
  if (cache->pieces_.size() >= BpeCache::kMaxPieces) cache->pieces_.clear();
  absl::InlinedVector<int32_t, 4> ids;
  for (int32_t id : Merge(piece)) {
    if (id < static_cast<int32_t>(decoder_.size())) ids.push_back(id);
  }
  return cache->pieces_.emplace(std::string(piece), std::move(ids)).first->second;
}

bool Gpt2Bpe::ShortPieceIds(std::string_view piece, uint64_t key, BpeCache* cache,
                            uint64_t* ids) const {
  if (auto found = cache->short_pieces_.find(key); found != cache->short_pieces_.end()) {
    *ids = found->second;
    return true;
  }
  const absl::InlinedVector<int32_t, 4>& merged = PieceIds(piece, cache);
  if (merged.size() > 2) return false;
  *ids = 0;
  for (size_t i = 0; i < merged.size(); ++i) *ids |= PackId(merged[i], i);
  if (cache->short_pieces_.size() >= BpeCache::kMaxPieces) cache->short_pieces_.clear();
  cache->short_pieces_.emplace(key, *ids);
  return true;
}

template <typename Id>
void Gpt2Bpe::AppendIds(std::string_view text, BpeCache* cache, std::vector<Id>* ids) const {
  const auto vocab = static_cast<int32_t>(decoder_.size());
  const char* const text_end = text.data() + text.size();
  Gpt2Splitter splitter(text);
  for (std::string_view piece; splitter.Next(&piece);) {
    if (piece.size() == 1) {  // one byte, one symbol: nothing to merge or to look up
      const int32_t id = byte_ids_[static_cast<unsigned char>(piece[0])];
      if (id < vocab) ids->push_back(static_cast<Id>(id));
      continue;
    }
    uint64_t packed = 0;
    if (piece.size() <= 7 && ShortPieceIds(piece, ShortKey(piece, text_end), cache, &packed)) {
      for (; packed != 0; packed >>= 32) ids->push_back(static_cast<Id>((packed & 0xFFFFFFFF) - 1));
      continue;
    }
    for (int32_t id : PieceIds(piece, cache)) ids->push_back(static_cast<Id>(id));
  }
}

void Gpt2Bpe::Encode(std::string_view text, BpeCache* cache, std::vector<int64_t>* ids) const {
  AppendIds(text, cache, ids);
}

void Gpt2Bpe::Encode(std::string_view text, BpeCache* cache, std::vector<uint16_t>* ids) const {
  AppendIds(text, cache, ids);
}

std::vector<int64_t> Gpt2Bpe::Encode(std::string_view text) const {
  BpeCache cache;
  std::vector<int64_t> ids;
  Encode(text, &cache, &ids);
  return ids;
}

std::string Gpt2Bpe::Decode(const std::vector<int64_t>& ids) const {
  std::string symbols;
  for (int64_t id : ids) {
    if (id >= 0 && static_cast<size_t>(id) < decoder_.size()) symbols += decoder_[id];
  }
  std::string bytes;
  for (size_t pos = 0; pos < symbols.size();) {
    const size_t start = pos;
    NextCodePoint(symbols, &pos);
    const auto it = symbol_to_byte_.find(symbols.substr(start, pos - start));
    if (it != symbol_to_byte_.end()) bytes.push_back(static_cast<char>(it->second));
  }
  return bytes;
}

}  // namespace spheret::train
