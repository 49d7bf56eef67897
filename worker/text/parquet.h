// Parquet input of `spheret-lm prepare` and of zero-shot task data, read with Apache Arrow's C++
// Parquet reader (worker/text/parquet.cc): row group by row group, a batch of rows at a time, so
// memory stays bounded whatever the file's size. A build without Arrow (cmake/Arrow.cmake)
// compiles worker/text/parquet_absent.cc instead, which refuses every file saying how to enable
// Parquet. No Arrow type appears here: only the two sources include Arrow's headers.
//
// Rows and row groups are counted from 0, as pyarrow counts them (ParquetFile.read_row_group(g),
// table.slice(r)); the reader asks for no decryption (spheret reads no encrypted Parquet).
//
// Bounded input (issue 44, item 3): Arrow decompresses a page whole, into a buffer of the size
// its header states, so before a row group is read the headers of its column chunks' pages are
// read (worker/text/parquet_pages.h) and a page larger than its values could be at
// max_value_bytes each (the limit of a JSONL line), or over ParquetPageLimit, is refused without
// being read; a string value over max_value_bytes is refused once decoded; and a batch holds as
// many rows as fit kParquetBatchBytes at the largest page's size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "worker/text/jsonl.h"

namespace spheret::train {

// Whether this build reads Parquet; when false the readers below return FailedPrecondition.
bool ParquetEnabled();

// A page's limit is this many times max_value_bytes (at least kParquetMinPageLimit's): pyarrow's
// writer checks a page's size once per 1,024 values, so a page of legitimate values can hold
// hundreds of MB (200 values of 3 MiB: one page of 629 MB).
inline constexpr int64_t kParquetPageLimitValues = 16;
inline constexpr int64_t kParquetMinPageLimit = 64 << 20;
// The rows of a batch are chosen so that the batch's values take at most about this much (rows
// of values as large as the largest page): 256 rows a batch at pages of 1 MiB.
inline constexpr int64_t kParquetBatchBytes = 256 << 20;

struct ParquetReadOptions {
  // A string value longer than this is refused, naming its row (prepare: --max-line-bytes):
  // before its page is read when the page's size shows it (ParquetValuesFit), else once decoded.
  int64_t max_value_bytes = kDefaultMaxJsonlLineBytes;
  // A page larger than this once decompressed is refused from its header, before it is read;
  // 0: ParquetPageLimit's default.
  int64_t max_page_bytes = 0;
};

// options.max_page_bytes if set, else kParquetPageLimitValues * max(max_value_bytes,
// kParquetMinPageLimit) (1 GiB by default), at most 2^31 - 1 (a page's size is an i32).
inline int64_t ParquetPageLimit(const ParquetReadOptions& options) {
  if (options.max_page_bytes > 0) return options.max_page_bytes;
  constexpr int64_t kMaxPage = (int64_t{1} << 31) - 1;
  const int64_t value = std::min(options.max_value_bytes, kMaxPage);
  return std::min(kParquetPageLimitValues * std::max(value, kParquetMinPageLimit), kMaxPage);
}

// What ReadParquetText counted.
struct ParquetTextCounts {
  int64_t values = 0;  // non-null values given to on_text
  int64_t nulls = 0;   // null values skipped (a null is no document)
};

// A row's place in its file.
struct ParquetRow {
  int row_group = 0;
  int64_t row = 0;         // the row's index in the file
  int64_t bytes_done = 0;  // the file's bytes read up to this row, pro rata of the rows
};

// "FILE row group G row R: ", the prefix of a message about a row.
std::string ParquetWhere(const std::string& file, const ParquetRow& row);

// Calls `on_text` with each non-null value of the top-level column `column` (string, large_string
// or string_view, or a dictionary of them), in the file's order; `text` lives during the call
// only; *counts (may be null) gets the values and nulls seen. Stops at the first error and
// returns it: InvalidArgument naming the file when it is not a readable Parquet file (a foreign
// or truncated one), has no such column (its columns listed) or one of another type (named);
// naming the file and row group when a page cannot be read; naming the file, row group and row
// for invalid UTF-8 (and at which byte), for a value over max_value_bytes and for a page over
// ParquetPageLimit (its first row: the row group's for a dictionary page), each limit named; or
// on_text's own error as is.
using ParquetTextFn = std::function<absl::Status(std::string_view text, const ParquetRow& row)>;
absl::Status ReadParquetText(const std::string& file, const std::string& column,
                             const ParquetTextFn& on_text, const ParquetReadOptions& options = {},
                             ParquetTextCounts* counts = nullptr);

// Calls `on_row` with each row as the JSON object that the same row written as a JSONL line would
// parse to: a struct is an object, a list an array; strings (UTF-8 checked), integers (unsigned
// when >= 0, as nlohmann parses them), floating point, booleans and nulls are themselves, and a
// dictionary column gives its values. Errors as above; a column of a type with no JSON form here
// (binary, timestamp, map, ...) is refused before any row is read, named with its type. The
// limits as above, on every column (a page of a nested column is named by its first value).
using ParquetRowFn = std::function<absl::Status(nlohmann::json& document, const ParquetRow& row)>;
absl::Status ReadParquetRows(const std::string& file, const ParquetRowFn& on_row,
                             const ParquetReadOptions& options = {});

}  // namespace spheret::train
