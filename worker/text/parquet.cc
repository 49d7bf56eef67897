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
#include <parquet/schema.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text_prefix.h"
#include "worker/text/parquet_pages.h"
#include "worker/text/parquet_values.h"

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
  ParquetReadOptions options;
  std::unique_ptr<parquet::arrow::FileReader> reader;
  std::shared_ptr<arrow::Schema> schema;
  std::shared_ptr<parquet::FileMetaData> metadata;
  int64_t size = 0, rows = 0;
  int row_groups = 0;
};

// An Arrow or Parquet message on one line (they may span several) and bounded.
std::string Reason(std::string_view message) {
  std::string text(absl::StripAsciiWhitespace(absl::string_view(message.data(), message.size())));
  std::replace(text.begin(), text.end(), '\n', ' ');
  return TextPrefix(text, kReasonBytes);
}

absl::Status OpenFile(const std::string& path, const ParquetReadOptions& options, File* file) {
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
  file->metadata = file->reader->parquet_reader()->metadata();
  file->path = path;
  file->options = options;
  file->rows = file->metadata->num_rows();
  file->row_groups = file->metadata->num_row_groups();
  std::error_code ec;
  file->size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  return absl::OkStatus();
}

int64_t BytesDone(const File& file, int64_t row) {
  if (file.rows <= 0) return file.size;
  return static_cast<int64_t>(static_cast<double>(file.size) * static_cast<double>(row + 1) /
                              static_cast<double>(file.rows));
}

// The file's bytes, for ScanColumnChunk.
ParquetReadAt ReadAt(std::ifstream* in) {
  return [in](int64_t offset, int64_t bytes, std::string* out) {
    out->resize(static_cast<size_t>(bytes));
    in->clear();
    in->seekg(offset);
    in->read(out->data(), bytes);
    out->resize(static_cast<size_t>(std::max<std::streamsize>(in->gcount(), 0)));
    if (in->bad()) return absl::InvalidArgumentError(std::string("I/O error: ") + strerror(errno));
    return absl::OkStatus();
  };
}

// The refusal of a page over `limit` (scan.over_limit) of leaf column `leaf`, named by its rows
// (a nested column's by its values; a dictionary page by its row group's first row).
absl::Status PageOverLimit(const File& file, ParquetRow at, int leaf, const ParquetChunkScan& scan,
                           int64_t limit) {
  const parquet::ColumnDescriptor* column = file.metadata->schema()->Column(leaf);
  const int64_t count = std::max<int64_t>(scan.page.values, 1);
  const bool dictionary = scan.page.type == static_cast<int32_t>(ParquetPageType::kDictionary);
  std::string page = "its dictionary page";
  if (!dictionary && column->max_repetition_level() == 0) {  // a value a row
    at.row += scan.first_value;
    page = absl::StrCat("the page of rows ", at.row, " to ", at.row + count - 1);
  } else if (!dictionary) {
    page = absl::StrCat("the page of its values ", scan.first_value, " to ",
                        scan.first_value + count - 1);
  }
  const std::string holds =
      absl::StrCat(ParquetWhere(file.path, at), "column '", column->path()->ToDotString(),
                   "' holds ", scan.page.uncompressed_bytes, " bytes in ", page, " at byte ",
                   scan.page_offset, " once decompressed, ");
  if (scan.value_over_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        holds, "more than its ", count, " value(s) can hold at the limit of ",
        file.options.max_value_bytes,
        " bytes a value (spheret-lm prepare --max-line-bytes): refused before it is read"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      holds, "over the limit of ", limit,
      " bytes on a page (a page is decompressed whole; the limit is ", kParquetPageLimitValues,
      " values at the limit on a value: spheret-lm prepare --max-line-bytes)"));
}

// Reads the headers of the row group's pages in `leaves` before Arrow reads a page: refuses one
// that must hold a value over the limit or is over ParquetPageLimit, and sizes the batches so that
// their rows' values fit kParquetBatchBytes (a row of flat columns is no larger than their largest
// pages together).
absl::Status ScanRowGroup(const File& file, const std::vector<int>& leaves, const ParquetRow& at) {
  std::ifstream in(file.path, std::ios::binary);
  const std::unique_ptr<parquet::RowGroupMetaData> group = file.metadata->RowGroup(at.row_group);
  const int64_t limit = ParquetPageLimit(file.options);
  int64_t row_bytes = 1;
  for (const int leaf : leaves) {
    const std::unique_ptr<parquet::ColumnChunkMetaData> chunk = group->ColumnChunk(leaf);
    int64_t start = chunk->data_page_offset();
    if (chunk->has_dictionary_page() && chunk->dictionary_page_offset() > 0) {
      start = std::min(start, chunk->dictionary_page_offset());  // as Arrow's reader does
    }
    ParquetChunkScan scan;
    const absl::Status read =
        ScanColumnChunk(ReadAt(&in), start, chunk->total_compressed_size(), chunk->num_values(),
                        file.options.max_value_bytes, limit, &scan);
    if (!read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file.path, " row group ", at.row_group,
                                                     ": cannot read (", read.message(), ")"));
    }
    if (scan.over_limit) return PageOverLimit(file, at, leaf, scan, limit);
    row_bytes += scan.max_page_bytes;
  }
  file.reader->set_batch_size(std::clamp<int64_t>(kParquetBatchBytes / row_bytes, 1, kBatchRows));
  return absl::OkStatus();
}

using BatchFn = std::function<absl::Status(const arrow::RecordBatch& batch, ParquetRow first)>;

// One row group's batches of `columns` (leaf column indices; every column when empty).
absl::Status ReadRowGroup(const File& file, const std::vector<int>& columns, ParquetRow* at,
                          const BatchFn& on_batch) {
  const auto error = [&](const arrow::Status& status) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path, " row group ", at->row_group, ": cannot read (", Reason(status.message()), ")"));
  };
  std::vector<int> leaves = columns;
  for (int leaf = 0; columns.empty() && leaf < file.metadata->num_columns(); ++leaf) {
    leaves.push_back(leaf);
  }
  SPHERET_RETURN_IF_ERROR(ScanRowGroup(file, leaves, *at));
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
                      const ParquetTextFn& on_text, const ParquetReadOptions& options,
                      ParquetTextCounts* counts) {
  File file;
  SPHERET_RETURN_IF_ERROR(OpenFile(path, options, &file));
  int leaf = 0;
  SPHERET_RETURN_IF_ERROR(FindTextColumn(file, column, &leaf));
  return ForEachBatch(file, {leaf}, [&](const arrow::RecordBatch& batch, ParquetRow at) {
    const arrow::Array& values = *batch.column(0);
    for (int64_t i = 0; i < batch.num_rows(); ++i, ++at.row) {
      const std::optional<std::string_view> text = TextAt(values, i);
      if (!text.has_value()) {  // a null is no document
        ++counts->nulls;
        continue;
      }
      ++counts->values;
      if (absl::Status bad = CheckText(*text, column, options.max_value_bytes); !bad.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(ParquetWhere(path, at), bad.message()));
      }
      at.bytes_done = BytesDone(file, at.row);
      SPHERET_RETURN_IF_ERROR(on_text(*text, at));
    }
    return absl::OkStatus();
  });
}

absl::Status ReadRows(const std::string& path, const ParquetRowFn& on_row,
                      const ParquetReadOptions& options) {
  File file;
  SPHERET_RETURN_IF_ERROR(OpenFile(path, options, &file));
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
        const absl::Status bad =
            ValueJson(*batch.column(c), i, name, options.max_value_bytes, &document[name]);
        if (!bad.ok()) {
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
                             const ParquetTextFn& on_text, const ParquetReadOptions& options,
                             ParquetTextCounts* counts) {
  ParquetTextCounts ignored;
  return Guarded(file, [&] {
    return ReadText(file, column, on_text, options, counts != nullptr ? counts : &ignored);
  });
}

absl::Status ReadParquetRows(const std::string& file, const ParquetRowFn& on_row,
                             const ParquetReadOptions& options) {
  return Guarded(file, [&] { return ReadRows(file, on_row, options); });
}

}  // namespace spheret::train
