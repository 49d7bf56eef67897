#include "worker/text/unicode_classes.h"

#include "worker/text/unicode_tables.h"

namespace spheret::train {

bool IsUnicodeLetter(char32_t c) { return text::InRanges(text::kLetter, c); }
bool IsUnicodeNumber(char32_t c) { return text::InRanges(text::kNumber, c); }
bool IsUnicodeWhiteSpace(char32_t c) { return text::InRanges(text::kWhiteSpace, c); }
const char* UnicodeClassesVersion() { return text::kUnicodeVersion; }

}  // namespace spheret::train
