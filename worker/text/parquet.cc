// Compiled as C++20 (Arrow 26's headers need it; worker/text/CMakeLists.txt), and only when
// cmake/Arrow.cmake finds Arrow.
#include "worker/text/parquet.h"

#include <arrow/array.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text_prefix.h"
#include "worker/text/jsonl.h"

namespace spheret::train {
namespace {

using nlohmann::json;

// Rows decoded at a time: a batch holds them whole, so with pages of ~1 MB (pyarrow's default)
// and documents of a few kB the reader holds a few MB, whatever the row group's size (a 1 GB
// file of one row group: README's figures).
constexpr int64_t kBatchRows = 256;
// The buffered stream's buffer: a column chunk is read in pieces of this size, not whole.
constexpr int64_t kStreamBufferBytes = 1 << 20;
constexpr size_t kReasonBytes = 300;  // of an Arrow message quoted in ours

// Arrow's default pool (jemalloc in the pyarrow wheel): on a 1 GB file prepare's peak RSS is
// JSONL's (README) with it, and 1.04x JSONL's with glibc's malloc (arrow::system_memory_pool()).
arrow::MemoryPool* Pool() { return arrow::default_memory_pool(); }

struct File {
  std::string path;
  std::unique_ptr<parquet::arrow::FileReader> reader;
  std::shared_ptr<arrow::Schema> schema;
  int64_t size = 0, rows = 0;
  int row_groups = 0;
};

// An Arrow or Parquet message on one line (they may span several) and bounded.
std::string Reason(std::string_view message) {
  std::string text(absl::StripAsciiWhitespace(absl::string_view(message.data(), message.size())));
  std::replace(text.begin(), text.end(), '\n', ' ');
  return TextPrefix(text, kReasonBytes);
}

absl::Status OpenFile(const std::string& path, File* file) {
  parquet::ReaderProperties properties(Pool());
  properties.enable_buffered_stream();
  properties.set_buffer_size(kStreamBufferBytes);
  parquet::ArrowReaderProperties arrow_properties(/*use_threads=*/false);
  arrow_properties.set_batch_size(kBatchRows);
  arrow_properties.set_pre_buffer(false);  // pre-buffering reads a row group's columns whole
  parquet::arrow::FileReaderBuilder builder;
  arrow::Status status = builder.OpenFile(path, /*memory_map=*/false, properties);
  if (status.ok()) {
    status = builder.memory_pool(Pool())->properties(arrow_properties)->Build(&file->reader);
  }
  if (status.ok()) status = file->reader->GetSchema(&file->schema);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a readable Parquet file (", Reason(status.message()), ")"));
  }
  const std::shared_ptr<parquet::FileMetaData> metadata =
      file->reader->parquet_reader()->metadata();
  file->path = path;
  file->rows = metadata->num_rows();
  file->row_groups = metadata->num_row_groups();
  std::error_code ec;
  file->size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  return absl::OkStatus();
}

int64_t BytesDone(const File& file, int64_t row) {
  if (file.rows <= 0) return file.size;
  return static_cast<int64_t>(static_cast<double>(file.size) * static_cast<double>(row + 1) /
                              static_cast<double>(file.rows));
}

using BatchFn = std::function<absl::Status(const arrow::RecordBatch& batch, ParquetRow first)>;

// One row group's batches of `columns` (leaf column indices; every column when empty).
absl::Status ReadRowGroup(const File& file, const std::vector<int>& columns, ParquetRow* at,
                          const BatchFn& on_batch) {
  const auto error = [&](const arrow::Status& status) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path, " row group ", at->row_group, ": cannot read (", Reason(status.message()), ")"));
  };
  auto batches = columns.empty() ? file.reader->GetRecordBatchReader({at->row_group})
                                 : file.reader->GetRecordBatchReader({at->row_group}, columns);
  if (!batches.ok()) return error(batches.status());
  for (;;) {
    std::shared_ptr<arrow::RecordBatch> batch;
    if (arrow::Status status = (*batches)->ReadNext(&batch); !status.ok()) return error(status);
    if (batch == nullptr) return absl::OkStatus();
    SPHERET_RETURN_IF_ERROR(on_batch(*batch, *at));
    at->row += batch->num_rows();
  }
}

// Calls on_batch with each batch, row group by row group.
absl::Status ForEachBatch(const File& file, const std::vector<int>& columns,
                          const BatchFn& on_batch) {
  ParquetRow at;
  for (at.row_group = 0; at.row_group < file.row_groups; ++at.row_group) {
    try {
      SPHERET_RETURN_IF_ERROR(ReadRowGroup(file, columns, &at, on_batch));
    } catch (const std::exception& e) {  // Parquet's own errors are exceptions
      return absl::InvalidArgumentError(absl::StrCat(file.path, " row group ", at.row_group,
                                                     ": cannot read (", Reason(e.what()), ")"));
    }
  }
  return absl::OkStatus();
}

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

// Row i of an array of an IsText type; nullopt for a null.
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

absl::Status CheckUtf8(std::string_view text, const std::string& column) {
  if (const size_t bad = InvalidUtf8At(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid UTF-8 at byte ", bad + 1, " of column '", column, "'"));
  }
  return absl::OkStatus();
}

// The leaf column index of top-level column `name`, a text column.
absl::Status FindTextColumn(const File& file, const std::string& name, int* leaf) {
  const int field = file.schema->GetFieldIndex(name);  // -1 also when the name repeats
  if (field < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path, ": no column '", TextPrefix(name),
        "' (columns: ", TextPrefix(absl::StrJoin(file.schema->field_names(), ", "), kReasonBytes),
        "; name the documents' column with --text-field)"));
  }
  const arrow::DataType& type = *file.schema->field(field)->type();
  if (!IsText(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path, ": column '", name, "' is ", type.ToString(),
                     ", not text (string, large_string or string_view)"));
  }
  *leaf = file.reader->manifest().schema_fields[static_cast<size_t>(field)].column_index;
  return absl::OkStatus();
}

absl::Status ReadText(const std::string& path, const std::string& column,
                      const ParquetTextFn& on_text) {
  File file;
  SPHERET_RETURN_IF_ERROR(OpenFile(path, &file));
  int leaf = 0;
  SPHERET_RETURN_IF_ERROR(FindTextColumn(file, column, &leaf));
  return ForEachBatch(file, {leaf}, [&](const arrow::RecordBatch& batch, ParquetRow at) {
    const arrow::Array& values = *batch.column(0);
    for (int64_t i = 0; i < batch.num_rows(); ++i, ++at.row) {
      const std::optional<std::string_view> text = TextAt(values, i);
      if (!text.has_value()) continue;  // a null is no document
      if (absl::Status bad = CheckUtf8(*text, column); !bad.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(ParquetWhere(path, at), bad.message()));
      }
      at.bytes_done = BytesDone(file, at.row);
      SPHERET_RETURN_IF_ERROR(on_text(*text, at));
    }
    return absl::OkStatus();
  });
}

// OK when a column of `type` has a JSON form (ValueJson), else why not.
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

absl::Status ValueJson(const arrow::Array& array, int64_t i, const std::string& column, json* out);

template <typename ArrayType>
json IntegerJson(const arrow::Array& array, int64_t i) {
  const auto value = static_cast<const ArrayType&>(array).Value(i);
  if constexpr (std::is_signed_v<decltype(value)>) {
    if (value < 0) return json(static_cast<int64_t>(value));
  }
  return json(static_cast<uint64_t>(value));  // as nlohmann parses a number >= 0
}

template <typename ListType>
absl::Status ListJson(const arrow::Array& array, int64_t i, const std::string& column, json* out) {
  const auto& list = static_cast<const ListType&>(array);
  *out = json::array();
  const int64_t begin = list.value_offset(i), length = list.value_length(i);
  for (int64_t k = begin; k < begin + length; ++k) {
    SPHERET_RETURN_IF_ERROR(ValueJson(*list.values(), k, column, &out->emplace_back()));
  }
  return absl::OkStatus();
}

absl::Status StructJson(const arrow::Array& array, int64_t i, const std::string& column,
                        json* out) {
  const auto& record = static_cast<const arrow::StructArray&>(array);
  *out = json::object();
  for (int k = 0; k < record.num_fields(); ++k) {
    const std::string& name = record.struct_type()->field(k)->name();
    SPHERET_RETURN_IF_ERROR(ValueJson(*record.field(k), i, column + "." + name, &(*out)[name]));
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

// Row i of `array` as JSON (a type CheckJsonType accepted).
absl::Status ValueJson(const arrow::Array& array, int64_t i, const std::string& column, json* out) {
  if (array.IsNull(i)) {
    *out = nullptr;
    return absl::OkStatus();
  }
  switch (array.type_id()) {
    case arrow::Type::STRUCT:
      return StructJson(array, i, column, out);
    case arrow::Type::LIST:
      return ListJson<arrow::ListArray>(array, i, column, out);
    case arrow::Type::LARGE_LIST:
      return ListJson<arrow::LargeListArray>(array, i, column, out);
    case arrow::Type::FIXED_SIZE_LIST:
      return ListJson<arrow::FixedSizeListArray>(array, i, column, out);
    case arrow::Type::LIST_VIEW:
      return ListJson<arrow::ListViewArray>(array, i, column, out);
    case arrow::Type::LARGE_LIST_VIEW:
      return ListJson<arrow::LargeListViewArray>(array, i, column, out);
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
  SPHERET_RETURN_IF_ERROR(CheckUtf8(*text, column));
  *out = std::string(*text);
  return absl::OkStatus();
}

absl::Status ReadRows(const std::string& path, const ParquetRowFn& on_row) {
  File file;
  SPHERET_RETURN_IF_ERROR(OpenFile(path, &file));
  for (const auto& field : file.schema->fields()) {
    if (absl::Status bad = CheckJsonType(*field->type(), field->name()); !bad.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", bad.message()));
    }
  }
  return ForEachBatch(file, {}, [&](const arrow::RecordBatch& batch, ParquetRow at) {
    for (int64_t i = 0; i < batch.num_rows(); ++i, ++at.row) {
      json document = json::object();
      for (int c = 0; c < batch.num_columns(); ++c) {
        const std::string& name = batch.schema()->field(c)->name();
        if (absl::Status bad = ValueJson(*batch.column(c), i, name, &document[name]); !bad.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(ParquetWhere(path, at), bad.message()));
        }
      }
      at.bytes_done = BytesDone(file, at.row);
      SPHERET_RETURN_IF_ERROR(on_row(document, at));
    }
    return absl::OkStatus();
  });
}

// Exceptions from Arrow or Parquet (opening a file can throw) end as a Status naming the file.
template <typename Read>
absl::Status Guarded(const std::string& path, const Read& read) {
  try {
    return read();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a readable Parquet file (", Reason(e.what()), ")"));
  }
}

}  // namespace

bool ParquetEnabled() { return true; }

std::string ParquetWhere(const std::string& file, const ParquetRow& row) {
  return absl::StrCat(file, " row group ", row.row_group, " row ", row.row, ": ");
}

absl::Status ReadParquetText(const std::string& file, const std::string& column,
                             const ParquetTextFn& on_text) {
  return Guarded(file, [&] { return ReadText(file, column, on_text); });
}

absl::Status ReadParquetRows(const std::string& file, const ParquetRowFn& on_row) {
  return Guarded(file, [&] { return ReadRows(file, on_row); });
}

}  // namespace spheret::train
