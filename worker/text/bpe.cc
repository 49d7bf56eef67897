#include "worker/text/bpe.h"

#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/text/unicode_classes.h"

namespace spheret::train {
namespace {

// UTF-8 decoding: the code point at text[*pos], advancing *pos (invalid bytes become themselves).
char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto lead = static_cast<unsigned char>(text[*pos]);
  const int length = lead < 0x80         ? 1
                     : (lead >> 5) == 6  ? 2
                     : (lead >> 4) == 14 ? 3
                     : (lead >> 3) == 30 ? 4
                                         : 1;
  if (length == 1 || *pos + length > text.size()) {
    ++*pos;
    return lead;
  }
  char32_t cp = lead & (0x7F >> length);
  for (int i = 1; i < length; ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(text[*pos + i]) & 0x3F);
  *pos += length;
  return cp;
}

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

enum class Kind { kLetter, kNumber, kSpace, kOther };

// The class of `c` in GPT-2's regex: \p{L}, \p{N}, \s, or anything else (ASCII decided here:
// its letters are A-Z and a-z, its numbers 0-9, its white space \t..\r and space).
Kind KindOf(char32_t c) {
  if (c < 0x80) {
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return Kind::kLetter;
    if (c >= '0' && c <= '9') return Kind::kNumber;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return Kind::kSpace;
    return Kind::kOther;
  }
  if (IsUnicodeLetter(c)) return Kind::kLetter;
  if (IsUnicodeNumber(c)) return Kind::kNumber;
  if (IsUnicodeWhiteSpace(c)) return Kind::kSpace;
  return Kind::kOther;
}

}  // namespace

std::vector<std::string> SplitGpt2(std::string_view text) {
  std::vector<std::string> pieces;
  for (std::string_view piece : Gpt2Pieces(text)) pieces.emplace_back(piece);
  return pieces;
}

std::vector<std::string_view> Gpt2Pieces(std::string_view text) {
  std::vector<char32_t> cps;
  std::vector<Kind> kinds;
  std::vector<size_t> offsets;  // Byte offset of each code point, plus the end.
  for (size_t pos = 0; pos < text.size();) {
    offsets.push_back(pos);
    cps.push_back(NextCodePoint(text, &pos));
    kinds.push_back(KindOf(cps.back()));
  }
  offsets.push_back(text.size());
  const size_t n = cps.size();
  std::vector<std::string_view> pieces;
  auto emit = [&](size_t begin, size_t end) {
    pieces.push_back(text.substr(offsets[begin], offsets[end] - offsets[begin]));
  };
  auto run = [&](size_t from, Kind kind) {
    while (from < n && kinds[from] == kind) ++from;
    return from;
  };
  static const char* const kContractions[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  for (size_t i = 0; i < n;) {
    if (cps[i] == '\'') {  // 's 't 're 've 'm 'll 'd
      size_t matched = 0;
      for (const char* suffix : kContractions) {
        const size_t length = std::char_traits<char>::length(suffix);
        bool ok = true;
        for (size_t k = 0; ok && k < length; ++k) {
          ok = i + 1 + k < n && cps[i + 1 + k] == static_cast<char32_t>(suffix[k]);
        }
        if (ok) {
          matched = 1 + length;
          break;
        }
      }
      if (matched > 0) {
        emit(i, i + matched);
        i += matched;
        continue;
      }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one kind.
    const size_t start = (cps[i] == ' ' && i + 1 < n && kinds[i + 1] != Kind::kSpace) ? i + 1 : i;
    const Kind kind = kinds[start];
    if (kind != Kind::kSpace) {
      const size_t end = run(start, kind);
      emit(i, end);
      i = end;
      continue;
    }
    // `\s+(?!\S)` then `\s+`: a whitespace run, less its last character when a non-space follows.
    const size_t end = run(i, Kind::kSpace);
    const size_t cut = (end < n && end - i > 1) ? end - 1 : end;
    emit(i, cut);
    i = cut;
  }
  return pieces;
}

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

void Gpt2Bpe::Encode(std::string_view text, BpeCache* cache, std::vector<int64_t>* ids) const {
  const auto vocab = static_cast<int32_t>(decoder_.size());
  for (std::string_view piece : Gpt2Pieces(text)) {
    const absl::string_view key(piece.data(), piece.size());
    auto found = cache->pieces_.find(key);
    if (found == cache->pieces_.end()) {
      if (cache->pieces_.size() >= BpeCache::kMaxPieces) cache->pieces_.clear();
      found = cache->pieces_.emplace(std::string(piece), Merge(piece)).first;
    }
    for (int32_t id : found->second) {
      if (id < vocab) ids->push_back(id);
    }
  }
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
