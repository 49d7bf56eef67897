// Parquet input of `spheret-lm prepare` and of zero-shot task data, read with Apache Arrow's C++
// Parquet reader (worker/text/parquet.cc): row group by row group, a batch of rows at a time, so
// memory stays bounded whatever the file's size. A build without Arrow (cmake/Arrow.cmake)
// compiles worker/text/parquet_absent.cc instead, which refuses every file saying how to enable
// Parquet. No Arrow type appears here: only the two sources include Arrow's headers.
//
// Rows and row groups are counted from 0, as pyarrow counts them (ParquetFile.read_row_group(g),
// table.slice(r)); the reader asks for no decryption (spheret reads no encrypted Parquet).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace spheret::train {

// Whether this build reads Parquet; when false the readers below return FailedPrecondition.
bool ParquetEnabled();

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
// only. Stops at the first error and returns it: InvalidArgument naming the file when it is not a
// readable Parquet file (a foreign or truncated one), has no such column (its columns listed) or
// one of another type (named); naming the file and row group when a page cannot be read; naming
// the file, row group and row for invalid UTF-8 (and at which byte); or on_text's own error as is.
using ParquetTextFn = std::function<absl::Status(std::string_view text, const ParquetRow& row)>;
absl::Status ReadParquetText(const std::string& file, const std::string& column,
                             const ParquetTextFn& on_text);

// Calls `on_row` with each row as the JSON object that the same row written as a JSONL line would
// parse to: a struct is an object, a list an array; strings (UTF-8 checked), integers (unsigned
// when >= 0, as nlohmann parses them), floating point, booleans and nulls are themselves, and a
// dictionary column gives its values. Errors as above; a column of a type with no JSON form here
// (binary, timestamp, map, ...) is refused before any row is read, named with its type.
using ParquetRowFn = std::function<absl::Status(nlohmann::json& document, const ParquetRow& row)>;
absl::Status ReadParquetRows(const std::string& file, const ParquetRowFn& on_row);

}  // namespace spheret::train
