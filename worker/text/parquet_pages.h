// The pages of a Parquet column chunk, known from their headers alone: how large each page is once
// decompressed, read before any page is. Arrow's Parquet reader decompresses a page whole into a
// buffer of the size its header states, so a few KB of zstd can ask for GBs (issue 44, item 3):
// worker/text/parquet.cc scans a row group's column chunks with ScanColumnChunk and refuses a page
// over the limit before Arrow reads it. No Arrow here: the headers are read by a small reader of
// Thrift's compact protocol (parquet.thrift's PageHeader), so this part is fuzzed on its own
// (tests/fuzz/parquet_fuzz.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace spheret::train {

// parquet.thrift's PageType.
enum class ParquetPageType : int32_t { kData = 0, kIndex = 1, kDictionary = 2, kDataV2 = 3 };

// What a page header says of its page.
struct ParquetPageHeader {
  int32_t type = -1;                // a ParquetPageType (others are skipped, as Arrow does)
  int64_t uncompressed_bytes = -1;  // the page's size once decompressed
  int64_t compressed_bytes = -1;    // its size in the file, after the header
  int64_t values = 0;               // data pages: num_values (nulls too); dictionary: entries
  int64_t header_bytes = 0;         // the header's own size in the file
};

// Parses the header at the start of `bytes`. OutOfRange when `bytes` end inside it (read more);
// InvalidArgument when it is not a page header (nesting deeper than 32, a negative size or count,
// a required field missing), saying why.
absl::Status ParseParquetPageHeader(std::string_view bytes, ParquetPageHeader* header);

// Reads up to `bytes` bytes at `offset` into *out (fewer only where the file ends).
using ParquetReadAt = std::function<absl::Status(int64_t offset, int64_t bytes, std::string* out)>;

// A column chunk as ScanColumnChunk found it.
struct ParquetChunkScan {
  int64_t max_page_bytes = 0;     // the largest uncompressed page up to where the scan stopped
  bool over_limit = false;        // it stopped at a page over a limit:
  bool value_over_limit = false;  //   one of its values must be over max_value_bytes (else the
                                  //   page is over max_page_bytes);
  ParquetPageHeader page;         //   that page's header,
  int64_t page_offset = 0;        //   where it starts in the file,
  int64_t first_value = 0;  //   its first value's index in the chunk (0 for a dictionary page)
};

// Reads the headers of the chunk's pages, from `start` for `length` bytes (the chunk's
// total_compressed_size), until its data pages hold `num_values` values, as Arrow's page reader
// does; decompresses nothing. Stops (scan->over_limit) at the first data or dictionary page
// (those Arrow decompresses) that holds more than its values could at max_value_bytes each
// (ParquetValuesFit: a page of one 1 GiB value), or whose uncompressed size is over
// `max_page_bytes`; and at a page that passes the chunk's end (Arrow's reader refuses it).
// InvalidArgument "page header at byte B: REASON" when a header cannot be read or is longer than
// 16 MiB (Arrow's limit).
absl::Status ScanColumnChunk(const ParquetReadAt& read, int64_t start, int64_t length,
                             int64_t num_values, int64_t max_value_bytes, int64_t max_page_bytes,
                             ParquetChunkScan* scan);

// Whether `uncompressed_bytes` can hold `values` values (at least 1) of at most max_value_bytes
// each, with each one's 4-byte length and 2 bytes of levels, and 64 bytes of page overhead: when
// not, one of them is over the limit, known before the page is read.
bool ParquetValuesFit(int64_t uncompressed_bytes, int64_t values, int64_t max_value_bytes);

}  // namespace spheret::train
