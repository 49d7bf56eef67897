// The per-code-point tables behind python_text.h, generated from Python's own str methods by
// scripts/gen_python_text.py into python_text_tables.cc.
#pragma once

#include <array>

#include "absl/types/span.h"

namespace spheret::eval::tables {

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

extern const absl::Span<const CodePointRange> kSpace;          // str.isspace(), re's \s
extern const absl::Span<const CodePointRange> kCased;          // cased, not case-ignorable
extern const absl::Span<const CodePointRange> kCaseIgnorable;  // as lower()'s final sigma sees it
extern const absl::Span<const MappingRun> kLower;              // str.lower()
extern const absl::Span<const MultiMapping> kLowerMultiple;
extern const absl::Span<const MappingRun> kTitle;  // str.capitalize() of one character
extern const absl::Span<const MultiMapping> kTitleMultiple;

}  // namespace spheret::eval::tables
