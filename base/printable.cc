#include "base/printable.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace spheret {
namespace {

// The length of the valid UTF-8 sequence of two or more bytes at the start of `text`, or 0
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  size_t length = 0;
  uint8_t low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  }
  if (length == 0 || text.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

// `prefix` and two hex digits: \x1b, \u009b.
std::string HexEscape(const char* prefix, uint8_t value) {
  return absl::StrCat(prefix, absl::Hex(value, absl::kZeroPad2));
}

std::string Escape(std::string_view text, bool keep_lines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    if ((c >= 0x20 && c < 0x7F) || (keep_lines && (c == '\n' || c == '\t'))) {
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\r') {
      out += "\\r";
      ++i;
    } else if (c < 0x80) {
      out += HexEscape("\\x", c);  // C0 controls and DEL
      ++i;
    } else if (const size_t length = Utf8SequenceLength(text.substr(i)); length == 0) {
      out += HexEscape("\\x", c);  // not UTF-8 (a lone 0x9b is an 8-bit CSI)
      ++i;
    } else if (c == 0xC2 && static_cast<uint8_t>(text[i + 1]) < 0xA0) {
      out += HexEscape("\\u00", static_cast<uint8_t>(text[i + 1]));  // C1 controls
      i += 2;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace

std::string PrintableText(std::string_view text) { return Escape(text, /*keep_lines=*/false); }

std::string PrintableLines(std::string_view text) { return Escape(text, /*keep_lines=*/true); }

}  // namespace spheret
