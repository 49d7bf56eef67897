// The SQL functions printf() and format() of `spheret sql`, bounded. SQLite's own (3.40) repeats
// `%.*c` one character at a time up to the precision asked for, even after the value has passed
// the length limit, inside one VM instruction (no progress handler runs there: 2e9 repeats take
// 17 s), and then answers an empty text instead of an error. These replacements add up the widths
// and precisions a format asks for first and refuse one above the length limit with SQLITE_TOOBIG;
// a format within it runs SQLite's own printf on a private in-memory connection, and a result
// longer than the limit is refused the same way.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace spheret::client {

// The characters a format's conversions pad or repeat to, together: each conversion's width and
// (for all but the truncating %s, %z, %q, %Q and %w) its precision, read as SQLite reads them
// (`*` takes the next argument, as an int). `star_args` are the arguments after the format, as
// integers. Saturates at INT64_MAX.
int64_t FormatPaddingBytes(std::string_view format, const std::vector<int64_t>& star_args);

// Replaces printf() and format() on `db` for its lifetime with the bounded ones; a value longer
// than `max_value_bytes` (padding asked for, or the result) is an SQLITE_TOOBIG error of the
// statement. Fails when SQLite cannot open the private connection or register the functions.
absl::Status BoundPrintf(sqlite3* db, int max_value_bytes);

}  // namespace spheret::client
