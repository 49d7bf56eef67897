#include "worker/text/gpt2_pieces.h"

#include <array>

#include "worker/text/unicode_classes.h"

namespace spheret::train {
namespace {

using Class = Gpt2Class;

// ASCII's classes: letters A-Z and a-z, numbers 0-9, white space \t..\r and space.
constexpr std::array<Class, 128> kAsciiClass = [] {
  std::array<Class, 128> classes{};
  for (int c = 0; c < 128; ++c) {
    classes[c] = ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? Class::kLetter
                 : (c >= '0' && c <= '9')                 ? Class::kNumber
                 : (c == ' ' || (c >= '\t' && c <= '\r')) ? Class::kSpace
                                                          : Class::kOther;
  }
  return classes;
}();

Class ClassOfNonAscii(char32_t c) {
  if (IsUnicodeLetter(c)) return Class::kLetter;
  if (IsUnicodeNumber(c)) return Class::kNumber;
  if (IsUnicodeWhiteSpace(c)) return Class::kSpace;
  return Class::kOther;
}

inline Class ClassOf(char32_t c) { return c < 0x80 ? kAsciiClass[c] : ClassOfNonAscii(c); }

// The code point at `at` and, in *next, the byte after it; ASCII without decoding.
inline char32_t CodePointAt(std::string_view text, size_t at, size_t* next) {
  const auto byte = static_cast<unsigned char>(text[at]);
  *next = at;
  if (byte < 0x80) {
    ++*next;
    return byte;
  }
  return NextCodePoint(text, next);
}

}  // namespace

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

size_t Gpt2Splitter::ContractionEnd(size_t after) const {
  if (after >= text_.size()) return 0;
  size_t second = 0, third = 0;
  const char32_t c = CodePointAt(text_, after, &second);
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return second;
  if (second >= text_.size()) return 0;
  const char32_t d = CodePointAt(text_, second, &third);
  const bool two = (c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l');
  return two ? third : 0;
}

size_t Gpt2Splitter::RunEnd(size_t from, Class kind) const {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text_.data());
  const size_t n = text_.size();
  while (from < n) {
    if (bytes[from] < 0x80) {  // the common case, a table look-up
      if (kAsciiClass[bytes[from]] != kind) break;
      ++from;
      continue;
    }
    size_t next = from;
    if (ClassOfNonAscii(NextCodePoint(text_, &next)) != kind) break;
    from = next;
  }
  return from;
}

size_t Gpt2Splitter::SpaceEnd(size_t from, size_t after) const {
  size_t last = from, end = after;  // the run's last code point starts at `last`
  while (end < text_.size()) {
    size_t next = 0;
    if (ClassOf(CodePointAt(text_, end, &next)) != Class::kSpace) break;
    last = end;
    end = next;
  }
  // `\s+(?!\S)`: a run of several before a non-space leaves its last code point to what follows.
  return (end < text_.size() && last != from) ? last : end;
}

bool Gpt2Splitter::Next(std::string_view* piece) {
  const size_t from = pos_;
  if (from >= text_.size()) return false;
  size_t after = 0, end = 0;
  const char32_t first = CodePointAt(text_, from, &after);
  if (first == '\'') end = ContractionEnd(after);
  if (end == 0) {
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
    Class kind = ClassOf(first);
    if (first == ' ' && after < text_.size()) {
      size_t next = 0;
      const Class second = ClassOf(CodePointAt(text_, after, &next));
      if (second != Class::kSpace) {
        kind = second;
        after = next;
      }
    }
    end = kind == Class::kSpace ? SpaceEnd(from, after) : RunEnd(after, kind);
  }
  *piece = text_.substr(from, end - from);
  pos_ = end;
  return true;
}

std::vector<std::string> SplitGpt2(std::string_view text) {
  std::vector<std::string> pieces;
  for (std::string_view piece : Gpt2Pieces(text)) pieces.emplace_back(piece);
  return pieces;
}

std::vector<std::string_view> Gpt2Pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  Gpt2Splitter splitter(text);
  for (std::string_view piece; splitter.Next(&piece);) pieces.push_back(piece);
  return pieces;
}

}  // namespace spheret::train
