// Python's str semantics where the harness's prompt code depends on them, in UTF-8: what counts
// as whitespace (str.strip, re's \s), str.lower with its final sigma, str.capitalize, len() in
// code points, and the harness's two text clean-ups (HellaSwag's preprocess, WikiText's
// detokenizer). Input is valid UTF-8 (it comes from parsed JSON).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spheret::eval {

// The code points of UTF-8 text, and back.
std::u32string DecodeUtf8(std::string_view text);
std::string EncodeUtf8(std::u32string_view text);

bool IsPythonSpace(char32_t c);
std::string PythonStrip(std::string_view text);   // str.strip()
std::string PythonLStrip(std::string_view text);  // str.lstrip()
std::string PythonRStrip(std::string_view text);  // str.rstrip()
std::string PythonLower(std::string_view text);   // str.lower()
std::string PythonCapitalize(std::string_view text);
int64_t PythonLength(std::string_view text);  // len(): code points
// len(re.split(r"\s+", text)): the whitespace runs plus one.
int64_t WhitespaceSplitCount(std::string_view text);
// text.split(' '), Python's: on every single space.
std::vector<std::string> SplitOnSpace(std::string_view text);

// lm-evaluation-harness's hellaswag `preprocess`: strip, " [title]" -> ". ", drop "[...]" spans
// (not across a newline), "  " -> " ".
std::string HellaswagPreprocess(std::string_view text);
// lm-evaluation-harness's `wikitext_detokenizer`, replacement by replacement.
std::string WikitextDetokenize(std::string_view page);

}  // namespace spheret::eval
