#include "worker/text/python_text.h"

#include <algorithm>

#include "absl/strings/str_replace.h"
#include "worker/text/unicode_tables.h"

namespace spheret::eval {
namespace {

namespace tables = ::spheret::text;
using tables::InRanges;

// Appends what `c` maps to under one of the generated case mappings.
void AppendMapped(absl::Span<const tables::MappingRun> runs,
                  absl::Span<const tables::MultiMapping> multiple, char32_t c,
                  std::u32string* out) {
  auto multi = std::lower_bound(
      multiple.begin(), multiple.end(), c,
      [](const tables::MultiMapping& m, char32_t value) { return m.code_point < value; });
  if (multi != multiple.end() && multi->code_point == c) {
    out->append(DecodeUtf8(multi->utf8));
    return;
  }
  auto run =
      std::upper_bound(runs.begin(), runs.end(), c,
                       [](char32_t value, const tables::MappingRun& r) { return value < r.first; });
  if (run != runs.begin()) {
    --run;
    if (c <= run->last && (c - run->first) % run->stride == 0) {
      out->push_back(static_cast<char32_t>(static_cast<int64_t>(c) + run->delta));
      return;
    }
  }
  out->push_back(c);
}

// CPython's final-sigma rule for U+03A3 at `i`: after a cased letter (case-ignorable ones
// skipped) and not before one.
bool IsFinalSigma(const std::u32string& text, size_t i) {
  size_t j = i;
  while (j > 0 && InRanges(tables::kCaseIgnorable, text[j - 1])) --j;
  if (j == 0 || !InRanges(tables::kCased, text[j - 1])) return false;
  size_t k = i + 1;
  while (k < text.size() && InRanges(tables::kCaseIgnorable, text[k])) ++k;
  return k == text.size() || !InRanges(tables::kCased, text[k]);
}

std::u32string LowerFrom(const std::u32string& text, size_t begin) {
  std::u32string out;
  for (size_t i = begin; i < text.size(); ++i) {
    if (text[i] == U'\u03A3') {
      out.push_back(IsFinalSigma(text, i) ? U'\u03C2' : U'\u03C3');
    } else {
      AppendMapped(tables::kLower, tables::kLowerMultiple, text[i], &out);
    }
  }
  return out;
}

std::string Strip(std::string_view text, bool left, bool right) {
  const std::u32string chars = DecodeUtf8(text);
  size_t begin = 0, end = chars.size();
  while (left && begin < end && IsPythonSpace(chars[begin])) ++begin;
  while (right && end > begin && IsPythonSpace(chars[end - 1])) --end;
  return EncodeUtf8(std::u32string_view(chars).substr(begin, end - begin));
}

// re.sub(open + r"\s*([^" + close + r"]*?)\s*" + close, open + r"\1" + close, text): each
// `open` with a `close` after it has the whitespace inside both ends removed.
std::u32string TightenPairs(const std::u32string& text, char32_t open, char32_t close) {
  std::u32string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = text[i] == open ? text.find(close, i + 1) : std::u32string::npos;
    if (end == std::u32string::npos) {
      out.push_back(text[i++]);
      continue;
    }
    size_t a = i + 1, b = end;
    while (a < b && IsPythonSpace(text[a])) ++a;
    while (b > a && IsPythonSpace(text[b - 1])) --b;
    out.push_back(open);
    out.append(text, a, b - a);
    out.push_back(close);
    i = end + 1;
  }
  return out;
}

}  // namespace

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const int extra = byte < 0x80 ? 0 : byte < 0xE0 ? 1 : byte < 0xF0 ? 2 : 3;
    char32_t c = extra == 0 ? byte : byte & (0x3F >> extra);
    for (int k = 1; k <= extra && i + k < text.size(); ++k) {
      c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    out.push_back(c);
    i += 1 + extra;
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool IsPythonSpace(char32_t c) { return InRanges(tables::kPythonSpace, c); }

std::string PythonStrip(std::string_view text) { return Strip(text, true, true); }
std::string PythonLStrip(std::string_view text) { return Strip(text, true, false); }
std::string PythonRStrip(std::string_view text) { return Strip(text, false, true); }

std::string PythonLower(std::string_view text) {
  return EncodeUtf8(LowerFrom(DecodeUtf8(text), 0));
}

std::string PythonCapitalize(std::string_view text) {
  const std::u32string chars = DecodeUtf8(text);
  if (chars.empty()) return "";
  std::u32string out;
  AppendMapped(tables::kTitle, tables::kTitleMultiple, chars[0], &out);
  out += LowerFrom(chars, 1);
  return EncodeUtf8(out);
}

int64_t PythonLength(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

int64_t WhitespaceSplitCount(std::string_view text) {
  int64_t runs = 0;
  bool in_space = false;
  for (char32_t c : DecodeUtf8(text)) {
    const bool space = IsPythonSpace(c);
    if (space && !in_space) ++runs;
    in_space = space;
  }
  return runs + 1;
}

std::vector<std::string> SplitOnSpace(std::string_view text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t space = text.find(' ', begin);
    parts.emplace_back(text.substr(begin, space == std::string_view::npos ? space : space - begin));
    if (space == std::string_view::npos) return parts;
    begin = space + 1;
  }
}

std::string HellaswagPreprocess(std::string_view text) {
  std::string s = absl::StrReplaceAll(PythonStrip(text), {{" [title]", ". "}});
  std::string out;  // re.sub("\\[.*?\\]", "", s): '.' does not match a newline
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '[') {
      const size_t end = s.find_first_of("]\n", i + 1);
      if (end != std::string::npos && s[end] == ']') {
        i = end + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return absl::StrReplaceAll(out, {{"  ", " "}});
}

std::string WikitextDetokenize(std::string_view page) {
  std::string s = absl::StrReplaceAll(std::string(page), {{"s '", "s'"}});
  // re.sub(r"/' [0-9]/", r"/'[0-9]/", s): the harness writes the class itself back, literally.
  for (size_t at = s.find("/' "); at != std::string::npos;) {
    size_t next = at + 1;
    if (at + 4 < s.size() && s[at + 3] >= '0' && s[at + 3] <= '9' && s[at + 4] == '/') {
      s.replace(at, 5, "/'[0-9]/");
      next = at + 8;  // after the match, as re.sub goes on
    }
    at = s.find("/' ", next);
  }
  for (const auto& [from, to] :
       std::initializer_list<std::pair<const char*, const char*>>{{" @-@ ", "-"},
                                                                  {" @,@ ", ","},
                                                                  {" @.@ ", "."},
                                                                  {" : ", ": "},
                                                                  {" ; ", "; "},
                                                                  {" . ", ". "},
                                                                  {" ! ", "! "},
                                                                  {" ? ", "? "},
                                                                  {" , ", ", "}}) {
    s = absl::StrReplaceAll(s, {{from, to}});
  }
  std::u32string chars = DecodeUtf8(s);
  for (const auto& [open, close] : std::initializer_list<std::pair<char32_t, char32_t>>{
           {U'(', U')'}, {U'[', U']'}, {U'{', U'}'}, {U'"', U'"'}, {U'\'', U'\''}}) {
    chars = TightenPairs(chars, open, close);
  }
  s = EncodeUtf8(chars);
  for (const auto& [from, to] :
       std::initializer_list<std::pair<const char*, const char*>>{{"= = = =", "===="},
                                                                  {"= = =", "==="},
                                                                  {"= =", "=="},
                                                                  {" \u00B0 ", "\u00B0"},
                                                                  {" \n", "\n"},
                                                                  {"\n ", "\n"},
                                                                  {" N ", " 1 "},
                                                                  {" 's", "'s"}}) {
    s = absl::StrReplaceAll(s, {{from, to}});
  }
  return s;
}

}  // namespace spheret::eval
