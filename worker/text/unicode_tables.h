// Every per-code-point Unicode table of spheret_text, generated from Python's unicodedata and str
// methods by scripts/gen_unicode_tables.py into gen/unicode_tables.cc (one generator, one Unicode
// version for both users): unicode_classes.h (the BPE pre-tokenizer) and python_text.h (eval's
// Python str helpers). Internal to worker/text/.
#pragma once

#include <algorithm>
#include <array>

#include "absl/types/span.h"

namespace spheret::text {

// Code points first..last, inclusive; a table's ranges are sorted and apart.
struct CodePointRange {
  char32_t first, last;
};
// Code points first, first + stride, ..., last map to code point + delta.
struct MappingRun {
  char32_t first, last;
  int stride, delta;
};
// A code point that maps to several (UTF-8).
struct MultiMapping {
  char32_t code_point;
  const char* utf8;
};

extern const char kUnicodeVersion[];                           // e.g. "14.0.0"
extern const absl::Span<const CodePointRange> kLetter;         // General_Category L*: \p{L}
extern const absl::Span<const CodePointRange> kNumber;         // General_Category N*: \p{N}
extern const absl::Span<const CodePointRange> kWhiteSpace;     // White_Space: tiktoken's \s
extern const absl::Span<const CodePointRange> kPythonSpace;    // str.isspace(), re's \s
extern const absl::Span<const CodePointRange> kCased;          // cased, not case-ignorable
extern const absl::Span<const CodePointRange> kCaseIgnorable;  // as lower()'s final sigma sees it
extern const absl::Span<const MappingRun> kLower;              // str.lower()
extern const absl::Span<const MultiMapping> kLowerMultiple;
extern const absl::Span<const MappingRun> kTitle;  // str.capitalize() of one character
extern const absl::Span<const MultiMapping> kTitleMultiple;

// Whether `c` lies in one of `ranges`.
inline bool InRanges(absl::Span<const CodePointRange> ranges, char32_t c) {
  auto it = std::upper_bound(
      ranges.begin(), ranges.end(), c,
      [](char32_t value, const CodePointRange& range) { return value < range.first; });
  return it != ranges.begin() && c <= (it - 1)->last;
}

}  // namespace spheret::text
