// JSONL input of `spheret-lm prepare` (and of zero-shot task and request files): lines read with
// bounded memory (a line over the limit is refused while it is read, never held whole), and a
// document's text field taken from a line by a SAX pass (no JSON tree is built, so a hostile line
// costs about its own size, not a tree's). No LibTorch. Errors carry no input text beyond a short,
// bounded reason.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace spheret::train {

// The default limit on one JSONL line (`spheret-lm prepare --max-line-bytes`).
inline constexpr int64_t kDefaultMaxJsonlLineBytes = 64 << 20;

// Lines of a stream, split at '\n' (a '\r' before it stays part of the line). Not thread-safe.
class JsonlReader {
 public:
  // `in` is not owned and must outlive the reader; `name` names the input in messages.
  JsonlReader(std::istream* in, std::string name, int64_t max_line_bytes);

  // The next line into *line (without its '\n'); *done when the input has no more lines.
  // InvalidArgument "NAME line N: longer than the limit of M bytes (...)" as soon as a line
  // passes the limit, or naming a read error. After an error the reader is not usable.
  absl::Status Next(std::string* line, bool* done);
  int64_t line_number() const { return line_number_; }  // of the line Next returned last
  // "NAME line N: ", the prefix of a message about the current line.
  std::string Where() const;

 private:
  std::istream* in_;
  std::string name_;
  int64_t max_line_bytes_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // the unread bytes in buffer_
  int64_t line_number_ = 0;
};

// The string value of top-level key `field` of the JSON object on `line` into *text (the last
// one when the key repeats). InvalidArgument, with no location (the caller adds it): "invalid
// UTF-8 at byte B", "a lone surrogate escape (\uD800-\uDFFF without its pair) at byte B", "not
// valid JSON at byte B: <reason>", "not a JSON object", "no string field 'F'".
absl::Status ReadJsonlText(std::string_view line, const std::string& field, std::string* text);

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (RFC 3629: no
// overlong forms, no encoded surrogates, nothing above U+10FFFF), or npos when all of it is.
size_t InvalidUtf8At(std::string_view text);

// OK when `line` is one JSON object in valid UTF-8; otherwise the first four reasons above. For
// readers that build a JSON tree of a line (zero-shot task and request files) and want to say why
// a line is not one.
absl::Status CheckJsonlObject(std::string_view line);

}  // namespace spheret::train
