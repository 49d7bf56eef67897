#include "base/text_prefix.h"

#include "absl/strings/str_cat.h"

namespace spheret {

std::string TextPrefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Back up over UTF-8 continuation bytes (10xxxxxx) so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(absl::string_view(text.data(), cut), "... (", text.size(), " bytes)");
}

}  // namespace spheret
