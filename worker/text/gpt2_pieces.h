// GPT-2's pre-tokenizer: text into the pieces that the BPE merges one by one, as the pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ splits it, with
// Unicode's \p{L}, \p{N} and White_Space (worker/text/unicode_classes.h). A byte that does not
// start a UTF-8 sequence is a code point of its own value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spheret::train {

// The classes of GPT-2's pattern: \p{L}, \p{N}, \s, and anything else.
enum class Gpt2Class : unsigned char { kLetter, kNumber, kSpace, kOther };

// The pieces of one text, in order, as views of it (the text must outlive the splitter). ASCII is
// classed by a table, other code points by Unicode's tables. Not thread-safe; one per text.
class Gpt2Splitter {
 public:
  explicit Gpt2Splitter(std::string_view text) : text_(text) {}

  // The next piece into *piece; false when the text has no more.
  bool Next(std::string_view* piece);

 private:
  // The end of 's 't 're 've 'm 'll 'd whose apostrophe ends at `after`, or 0 when none follows.
  size_t ContractionEnd(size_t after) const;
  // The end of the run of `kind` code points from byte `from`.
  size_t RunEnd(size_t from, Gpt2Class kind) const;
  // The end of `\s+(?!\S)|\s+` from `from`, whose first code point ends at `after`.
  size_t SpaceEnd(size_t from, size_t after) const;

  std::string_view text_;
  size_t pos_ = 0;
};

// The code point at text[*pos] (a byte that starts no sequence, or one cut short, stands for
// itself), advancing *pos past it. Continuation bytes are not checked (the JSONL reader checks
// its text).
char32_t NextCodePoint(std::string_view text, size_t* pos);

// Every piece of `text` (for tests); Gpt2Pieces views `text`.
std::vector<std::string> SplitGpt2(std::string_view text);
std::vector<std::string_view> Gpt2Pieces(std::string_view text);

}  // namespace spheret::train
