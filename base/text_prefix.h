// Bounded echoes of untrusted text in error messages: a message that repeats a 10k-digit value or
// a 6 MB field whole overflows gRPC metadata, log lines and terminals.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace spheret {

// The default bound of an echoed value in a message.
inline constexpr size_t kEchoBytes = 64;

// `text` itself when it has at most `max_bytes` bytes; otherwise its first `max_bytes` bytes, cut
// back to a UTF-8 character boundary, then "... (N bytes)" with N the full length.
std::string TextPrefix(absl::string_view text, size_t max_bytes = kEchoBytes);

}  // namespace spheret
