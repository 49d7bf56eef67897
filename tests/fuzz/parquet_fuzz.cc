// Fuzz target: Parquet input (worker/text/parquet.h, parquet_pages.h; issue 44, item 3). The
// bytes are read as a column chunk whose page headers ScanColumnChunk reads (from byte 4 when
// they start with "PAR1", where a file's first page is), with limits of 1024 bytes a value and
// 4096 bytes a page so that inputs of a few KB reach both refusals; as one page header; and, in a
// build with Arrow (the replay target; the libFuzzer build has parquet_absent.cc), as a whole file
// by ReadParquetText and ReadParquetRows with values limited to 1024 bytes and pages to 4096. Any
// bytes give values or a bounded message; none may crash, hang, or get past a limit.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "worker/text/parquet.h"
#include "worker/text/parquet_pages.h"

namespace {

using spheret::train::ParquetRow;

constexpr int64_t kPageLimit = 4096;
constexpr int64_t kValueLimit = 1024;

void CheckMessage(const absl::Status& status, size_t path_bytes) {
  if (status.message().size() > path_bytes + 1000) std::abort();  // bounded: no input echoed
}

void ScanAsChunk(const std::string& bytes) {
  const int64_t start = bytes.rfind("PAR1", 0) == 0 ? 4 : 0;
  const auto read = [&](int64_t offset, int64_t count, std::string* out) {
    *out = offset < static_cast<int64_t>(bytes.size())
               ? bytes.substr(static_cast<size_t>(offset), static_cast<size_t>(count))
               : "";
    return absl::OkStatus();
  };
  spheret::train::ParquetChunkScan scan;
  const absl::Status status = spheret::train::ScanColumnChunk(
      read, start, static_cast<int64_t>(bytes.size()) - start, std::numeric_limits<int64_t>::max(),
      kValueLimit, kPageLimit, &scan);
  CheckMessage(status, 0);
  const bool fit =
      spheret::train::ParquetValuesFit(scan.page.uncompressed_bytes, scan.page.values, kValueLimit);
  if (scan.over_limit && fit && scan.page.uncompressed_bytes <= kPageLimit) std::abort();
  if (scan.value_over_limit && fit) std::abort();
  if (scan.max_page_bytes > kPageLimit) std::abort();
  spheret::train::ParquetPageHeader header;
  CheckMessage(spheret::train::ParseParquetPageHeader(bytes, &header), 0);
}

void ReadAsFile(const std::string& bytes) {
  const std::string path = "/tmp/spheret_parquet_fuzz_" + std::to_string(getpid()) + ".parquet";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  spheret::train::ParquetReadOptions options;
  options.max_value_bytes = kValueLimit;
  options.max_page_bytes = kPageLimit;
  const absl::Status text = spheret::train::ReadParquetText(
      path, "text",
      [](std::string_view value, const ParquetRow&) {
        if (static_cast<int64_t>(value.size()) > kValueLimit) std::abort();
        return absl::OkStatus();
      },
      options);
  CheckMessage(text, path.size());
  const absl::Status rows = spheret::train::ReadParquetRows(
      path,
      [](nlohmann::json& document, const ParquetRow&) {
        (void)document.dump();  // throws (a finding) on invalid UTF-8
        return absl::OkStatus();
      },
      options);
  CheckMessage(rows, path.size());
  std::remove(path.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ScanAsChunk(bytes);
  if (spheret::train::ParquetEnabled()) ReadAsFile(bytes);
  return 0;
}
