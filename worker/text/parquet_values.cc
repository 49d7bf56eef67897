// Compiled as C++20 with Arrow, like worker/text/parquet.cc.
#include "worker/text/parquet_values.h"

#include <arrow/type_traits.h>

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/text/jsonl.h"

namespace spheret::train {

using nlohmann::json;

bool IsText(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW:
      return true;
    case arrow::Type::DICTIONARY:
      return IsText(*static_cast<const arrow::DictionaryType&>(type).value_type());
    default:
      return false;
  }
}

std::optional<std::string_view> TextAt(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) return std::nullopt;
  switch (array.type_id()) {
    case arrow::Type::STRING:
      return static_cast<const arrow::StringArray&>(array).GetView(i);
    case arrow::Type::LARGE_STRING:
      return static_cast<const arrow::LargeStringArray&>(array).GetView(i);
    case arrow::Type::STRING_VIEW:
      return static_cast<const arrow::StringViewArray&>(array).GetView(i);
    default: {  // a dictionary of text
      const auto& dictionary = static_cast<const arrow::DictionaryArray&>(array);
      return TextAt(*dictionary.dictionary(), dictionary.GetValueIndex(i));
    }
  }
}

absl::Status CheckText(std::string_view text, const std::string& column, int64_t max_bytes) {
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a value of ", text.size(), " bytes in column '",
                                                   column, "', over the limit of ", max_bytes,
                                                   " bytes"));
  }
  if (const size_t bad = InvalidUtf8At(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid UTF-8 at byte ", bad + 1, " of column '", column, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckJsonType(const arrow::DataType& type, const std::string& column) {
  switch (type.id()) {
    case arrow::Type::STRUCT:
      for (const auto& field : type.fields()) {
        SPHERET_RETURN_IF_ERROR(CheckJsonType(*field->type(), column + "." + field->name()));
      }
      return absl::OkStatus();
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST:
    case arrow::Type::LIST_VIEW:
    case arrow::Type::LARGE_LIST_VIEW:
      return CheckJsonType(*type.field(0)->type(), column);
    case arrow::Type::DICTIONARY:
      return CheckJsonType(*static_cast<const arrow::DictionaryType&>(type).value_type(), column);
    case arrow::Type::NA:
    case arrow::Type::BOOL:
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE:
      return absl::OkStatus();
    default:
      if (IsText(type) || arrow::is_integer(type.id())) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "column '", column, "' is ", type.ToString(),
          ", which has no JSON form here (struct, list, string, integer, float, bool, null)"));
  }
}

namespace {

template <typename ArrayType>
json IntegerJson(const arrow::Array& array, int64_t i) {
  const auto value = static_cast<const ArrayType&>(array).Value(i);
  if constexpr (std::is_signed_v<decltype(value)>) {
    if (value < 0) return json(static_cast<int64_t>(value));
  }
  return json(static_cast<uint64_t>(value));  // as nlohmann parses a number >= 0
}

template <typename ListType>
absl::Status ListJson(const arrow::Array& array, int64_t i, const std::string& column,
                      int64_t max_bytes, json* out) {
  const auto& list = static_cast<const ListType&>(array);
  *out = json::array();
  const int64_t begin = list.value_offset(i), length = list.value_length(i);
  for (int64_t k = begin; k < begin + length; ++k) {
    SPHERET_RETURN_IF_ERROR(ValueJson(*list.values(), k, column, max_bytes, &out->emplace_back()));
  }
  return absl::OkStatus();
}

absl::Status StructJson(const arrow::Array& array, int64_t i, const std::string& column,
                        int64_t max_bytes, json* out) {
  const auto& record = static_cast<const arrow::StructArray&>(array);
  *out = json::object();
  for (int k = 0; k < record.num_fields(); ++k) {
    const std::string& name = record.struct_type()->field(k)->name();
    SPHERET_RETURN_IF_ERROR(
        ValueJson(*record.field(k), i, column + "." + name, max_bytes, &(*out)[name]));
  }
  return absl::OkStatus();
}

absl::Status NumberJson(const arrow::Array& array, int64_t i, json* out) {
  switch (array.type_id()) {
    case arrow::Type::INT8:
      *out = IntegerJson<arrow::Int8Array>(array, i);
      break;
    case arrow::Type::INT16:
      *out = IntegerJson<arrow::Int16Array>(array, i);
      break;
    case arrow::Type::INT32:
      *out = IntegerJson<arrow::Int32Array>(array, i);
      break;
    case arrow::Type::INT64:
      *out = IntegerJson<arrow::Int64Array>(array, i);
      break;
    case arrow::Type::UINT8:
      *out = IntegerJson<arrow::UInt8Array>(array, i);
      break;
    case arrow::Type::UINT16:
      *out = IntegerJson<arrow::UInt16Array>(array, i);
      break;
    case arrow::Type::UINT32:
      *out = IntegerJson<arrow::UInt32Array>(array, i);
      break;
    case arrow::Type::UINT64:
      *out = IntegerJson<arrow::UInt64Array>(array, i);
      break;
    case arrow::Type::FLOAT:
      *out = static_cast<double>(static_cast<const arrow::FloatArray&>(array).Value(i));
      break;
    case arrow::Type::DOUBLE:
      *out = static_cast<const arrow::DoubleArray&>(array).Value(i);
      break;
    default:  // CheckJsonType let no other type through
      return absl::InternalError("no JSON form for " + array.type()->ToString());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValueJson(const arrow::Array& array, int64_t i, const std::string& column,
                       int64_t max_bytes, json* out) {
  if (array.IsNull(i)) {
    *out = nullptr;
    return absl::OkStatus();
  }
  switch (array.type_id()) {
    case arrow::Type::STRUCT:
      return StructJson(array, i, column, max_bytes, out);
    case arrow::Type::LIST:
      return ListJson<arrow::ListArray>(array, i, column, max_bytes, out);
    case arrow::Type::LARGE_LIST:
      return ListJson<arrow::LargeListArray>(array, i, column, max_bytes, out);
    case arrow::Type::FIXED_SIZE_LIST:
      return ListJson<arrow::FixedSizeListArray>(array, i, column, max_bytes, out);
    case arrow::Type::LIST_VIEW:
      return ListJson<arrow::ListViewArray>(array, i, column, max_bytes, out);
    case arrow::Type::LARGE_LIST_VIEW:
      return ListJson<arrow::LargeListViewArray>(array, i, column, max_bytes, out);
    case arrow::Type::BOOL:
      *out = static_cast<const arrow::BooleanArray&>(array).Value(i);
      return absl::OkStatus();
    default:
      break;
  }
  if (!IsText(*array.type())) return NumberJson(array, i, out);
  const std::optional<std::string_view> text = TextAt(array, i);
  if (!text.has_value()) {
    *out = nullptr;  // a dictionary's null value
    return absl::OkStatus();
  }
  SPHERET_RETURN_IF_ERROR(CheckText(*text, column, max_bytes));
  *out = std::string(*text);
  return absl::OkStatus();
}

}  // namespace spheret::train
