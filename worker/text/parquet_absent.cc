// Parquet input in a build without Apache Arrow (cmake/Arrow.cmake found none, or
// -DSPHERET_PARQUET=OFF): every file is refused, saying how to enable Parquet.
#include "absl/strings/str_cat.h"
#include "worker/text/parquet.h"

namespace spheret::train {
namespace {

absl::Status NoParquet(const std::string& file) {
  return absl::FailedPreconditionError(absl::StrCat(
      file,
      ": this build reads no Parquet (built without Apache Arrow's C++ libraries): run make deps, "
      "which installs pyarrow into .venv, then configure and build again (cmake finds Arrow "
      "there), or configure with -DARROW_ROOT=DIR naming an Arrow C++ install (DIR/include, "
      "DIR/lib); or convert the file to JSONL"));
}

}  // namespace

bool ParquetEnabled() { return false; }

std::string ParquetWhere(const std::string& file, const ParquetRow& row) {
  return absl::StrCat(file, " row group ", row.row_group, " row ", row.row, ": ");
}

absl::Status ReadParquetText(const std::string& file, const std::string&, const ParquetTextFn&,
                             const ParquetReadOptions&, ParquetTextCounts*) {
  return NoParquet(file);
}

absl::Status ReadParquetRows(const std::string& file, const ParquetRowFn&,
                             const ParquetReadOptions&) {
  return NoParquet(file);
}

}  // namespace spheret::train
