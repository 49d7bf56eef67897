// The fast path of ReadJsonlText (worker/text/jsonl.h): the string value of a top-level key of a
// JSON object, found in one pass over the line (no tokens, no per-character callbacks). It answers
// only for lines it is sure of, and leaves the rest (anything invalid, or rarer than a prepare
// corpus's lines) to nlohmann's parser, which says why a line is refused. No I/O, no allocation
// beyond *text.
#pragma once

#include <string>
#include <string_view>

namespace spheret::train {

// True when `line`, valid UTF-8, is one JSON object (RFC 8259) whose last top-level key `field`
// holds a string: *text is that string, unescaped. False, *text unspecified, when the line is
// not such an object, or holds what this scanner leaves to the full parser: a byte order mark, a
// number with an exponent or over 300 characters, nesting deeper than 64.
bool ScanJsonStringField(std::string_view line, std::string_view field, std::string* text);

}  // namespace spheret::train
