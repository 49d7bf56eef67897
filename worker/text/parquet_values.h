// Internal to worker/text/parquet.cc (compiled with Arrow, as C++20): the values of Arrow arrays
// read from Parquet, as text and as the JSON that the row's JSONL line would parse to.
#pragma once

#include <arrow/array.h>
#include <arrow/type.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace spheret::train {

// Whether `type` is string, large_string or string_view, or a dictionary of them.
bool IsText(const arrow::DataType& type);

// Row i of an array of an IsText type; nullopt for a null.
std::optional<std::string_view> TextAt(const arrow::Array& array, int64_t i);

// OK when `text` is valid UTF-8 of at most max_bytes bytes; else InvalidArgument naming the
// column and the byte, or the value's size and the limit (no location: the caller adds it).
absl::Status CheckText(std::string_view text, const std::string& column, int64_t max_bytes);

// OK when a column of `type` has a JSON form (ValueJson), else why not.
absl::Status CheckJsonType(const arrow::DataType& type, const std::string& column);

// Row i of `array` (a type CheckJsonType accepted) as JSON; its strings checked by CheckText.
absl::Status ValueJson(const arrow::Array& array, int64_t i, const std::string& column,
                       int64_t max_bytes, nlohmann::json* out);

}  // namespace spheret::train
