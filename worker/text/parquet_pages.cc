#include "worker/text/parquet_pages.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace spheret::train {
namespace {

constexpr int kMaxThriftDepth = 32;                  // nesting of structs, lists and maps
constexpr int64_t kFirstHeaderRead = 1 << 10;  // a header is read in 1 KiB, then more
constexpr int64_t kMaxHeaderBytes = 16 << 20;  // Arrow's default page header limit

// Thrift's compact protocol's type codes.
enum : uint8_t {
  kStop = 0,
  kTrue = 1,
  kFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
  kUuid = 13,
};

absl::Status Truncated() { return absl::OutOfRangeError("the header ends early"); }

// A cursor over compact-protocol bytes: every read is bounds-checked (OutOfRange at the end).
class CompactReader {
 public:
  explicit CompactReader(std::string_view bytes) : bytes_(bytes) {}
  size_t position() const { return at_; }

  absl::Status Byte(uint8_t* out) {
    if (at_ >= bytes_.size()) return Truncated();
    *out = static_cast<uint8_t>(bytes_[at_++]);
    return absl::OkStatus();
  }
  absl::Status Skip(uint64_t n) {
    if (n > bytes_.size() - at_) return Truncated();
    at_ += static_cast<size_t>(n);
    return absl::OkStatus();
  }
  absl::Status Varint(uint64_t* out) {
    *out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = 0;
      SPHERET_RETURN_IF_ERROR(Byte(&byte));
      *out |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return absl::OkStatus();
    }
    return absl::InvalidArgumentError("a varint longer than 10 bytes");
  }
  absl::Status Zigzag(int64_t* out) {
    uint64_t raw = 0;
    SPHERET_RETURN_IF_ERROR(Varint(&raw));
    *out = static_cast<int64_t>(raw >> 1) ^ -static_cast<int64_t>(raw & 1);
    return absl::OkStatus();
  }
  // The next field of a struct: *type kStop at its end, else its type and id.
  absl::Status Field(int64_t* last_id, uint8_t* type, int64_t* id) {
    uint8_t byte = 0;
    SPHERET_RETURN_IF_ERROR(Byte(&byte));
    *type = byte & 0x0F;
    if (byte == kStop) return absl::OkStatus();
    if (byte >> 4 != 0) {
      *id = *last_id + (byte >> 4);
    } else {
      SPHERET_RETURN_IF_ERROR(Zigzag(id));
    }
    *last_id = *id;
    return absl::OkStatus();
  }
  absl::Status SkipValue(uint8_t type, int depth, bool element);

 private:
  absl::Status SkipCollection(uint64_t size, uint8_t element_type, int depth) {
    for (uint64_t i = 0; i < size; ++i) {  // each element takes a byte at least: bounded
      SPHERET_RETURN_IF_ERROR(SkipValue(element_type, depth + 1, true));
    }
    return absl::OkStatus();
  }
  absl::Status SkipStruct(int depth) {
    int64_t last = 0, id = 0;
    for (;;) {
      uint8_t type = 0;
      SPHERET_RETURN_IF_ERROR(Field(&last, &type, &id));
      if (type == kStop) return absl::OkStatus();
      SPHERET_RETURN_IF_ERROR(SkipValue(type, depth + 1, false));
    }
  }

  std::string_view bytes_;
  size_t at_ = 0;
};

// Skips one value of `type`; a boolean takes a byte only as an element of a list, set or map.
absl::Status CompactReader::SkipValue(uint8_t type, int depth, bool element) {
  if (depth > kMaxThriftDepth) return absl::InvalidArgumentError("nested deeper than 32");
  uint64_t size = 0;
  switch (type) {
    case kTrue:
    case kFalse:
      return element ? Skip(1) : absl::OkStatus();
    case kByte:
      return Skip(1);
    case kI16:
    case kI32:
    case kI64:
      return Varint(&size);
    case kDouble:
      return Skip(8);
    case kUuid:
      return Skip(16);
    case kBinary:
      SPHERET_RETURN_IF_ERROR(Varint(&size));
      return Skip(size);
    case kList:
    case kSet: {
      uint8_t head = 0;
      SPHERET_RETURN_IF_ERROR(Byte(&head));
      size = head >> 4;
      if (size == 15) SPHERET_RETURN_IF_ERROR(Varint(&size));
      return SkipCollection(size, head & 0x0F, depth);
    }
    case kMap: {
      SPHERET_RETURN_IF_ERROR(Varint(&size));
      if (size == 0) return absl::OkStatus();
      uint8_t types = 0;
      SPHERET_RETURN_IF_ERROR(Byte(&types));
      for (uint64_t i = 0; i < size; ++i) {
        SPHERET_RETURN_IF_ERROR(SkipValue(types >> 4, depth + 1, true));
        SPHERET_RETURN_IF_ERROR(SkipValue(types & 0x0F, depth + 1, true));
      }
      return absl::OkStatus();
    }
    case kStruct:
      return SkipStruct(depth);
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown compact type ", type));
  }
}

// An i32 field's value (a negative one is refused: sizes and counts only).
absl::Status ReadCount(CompactReader* reader, uint8_t type, const char* name, int64_t* out) {
  if (type != kI32) return absl::InvalidArgumentError(absl::StrCat(name, " is not an i32"));
  SPHERET_RETURN_IF_ERROR(reader->Zigzag(out));
  if (*out < 0 || *out > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is ", *out));
  }
  return absl::OkStatus();
}

// DataPageHeader, DictionaryPageHeader and DataPageHeaderV2 all start with 1: i32 num_values.
absl::Status ReadPageValues(CompactReader* reader, int64_t* values) {
  int64_t last = 0, id = 0;
  for (;;) {
    uint8_t type = 0;
    SPHERET_RETURN_IF_ERROR(reader->Field(&last, &type, &id));
    if (type == kStop) return absl::OkStatus();
    if (id == 1) {
      SPHERET_RETURN_IF_ERROR(ReadCount(reader, type, "num_values", values));
    } else {
      SPHERET_RETURN_IF_ERROR(reader->SkipValue(type, 2, false));
    }
  }
}

absl::Status ReadHeaderField(CompactReader* reader, uint8_t type, int64_t id,
                             ParquetPageHeader* header) {
  int64_t value = 0;
  switch (id) {
    case 1:
      if (type != kI32) return absl::InvalidArgumentError("type is not an i32");
      SPHERET_RETURN_IF_ERROR(reader->Zigzag(&value));
      header->type = static_cast<int32_t>(std::clamp<int64_t>(value, -1, 1 << 20));
      return absl::OkStatus();
    case 2:
      return ReadCount(reader, type, "uncompressed_page_size", &header->uncompressed_bytes);
    case 3:
      return ReadCount(reader, type, "compressed_page_size", &header->compressed_bytes);
    case 5:  // data_page_header
    case 7:  // dictionary_page_header
    case 8:  // data_page_header_v2
      if (type == kStruct) return ReadPageValues(reader, &header->values);
      break;
    default:
      break;
  }
  return reader->SkipValue(type, 1, false);
}

absl::Status ScanError(int64_t offset, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("page header at byte ", offset, ": ", why));
}

// The header of the page at `offset`, read in growing pieces up to kMaxHeaderBytes.
absl::Status ReadHeaderAt(const ParquetReadAt& read, int64_t offset, ParquetPageHeader* page) {
  std::string bytes;
  for (int64_t want = kFirstHeaderRead;; want = std::min(2 * want, kMaxHeaderBytes)) {
    SPHERET_RETURN_IF_ERROR(read(offset, want, &bytes));
    const absl::Status parsed = ParseParquetPageHeader(bytes, page);
    if (parsed.ok()) return absl::OkStatus();
    if (!absl::IsOutOfRange(parsed)) return ScanError(offset, parsed.message());
    if (static_cast<int64_t>(bytes.size()) < want) return ScanError(offset, "the file ends in it");
    if (want >= kMaxHeaderBytes) return ScanError(offset, "longer than 16 MiB");
  }
}

}  // namespace

absl::Status ParseParquetPageHeader(std::string_view bytes, ParquetPageHeader* header) {
  *header = ParquetPageHeader{};
  CompactReader reader(bytes);
  int64_t last = 0, id = 0;
  for (;;) {
    uint8_t type = 0;
    SPHERET_RETURN_IF_ERROR(reader.Field(&last, &type, &id));
    if (type == kStop) break;
    SPHERET_RETURN_IF_ERROR(ReadHeaderField(&reader, type, id, header));
  }
  if (header->type < 0 || header->uncompressed_bytes < 0 || header->compressed_bytes < 0) {
    return absl::InvalidArgumentError("a required field (type, page sizes) is missing");
  }
  header->header_bytes = static_cast<int64_t>(reader.position());
  return absl::OkStatus();
}

bool ParquetValuesFit(int64_t uncompressed_bytes, int64_t values, int64_t max_value_bytes) {
  const int64_t per_value = std::min<int64_t>(max_value_bytes, int64_t{1} << 40) + 6;
  return (uncompressed_bytes - 64) / std::max<int64_t>(values, 1) <= per_value;
}

absl::Status ScanColumnChunk(const ParquetReadAt& read, int64_t start, int64_t length,
                             int64_t num_values, int64_t max_value_bytes, int64_t max_page_bytes,
                             ParquetChunkScan* scan) {
  *scan = ParquetChunkScan{};
  if (start < 0 || length < 0 || start > std::numeric_limits<int64_t>::max() - length) {
    return absl::InvalidArgumentError(
        absl::StrCat("a column chunk at byte ", start, " of ", length, " bytes"));
  }
  const int64_t end = start + length;
  int64_t offset = start, seen = 0;
  while (offset < end && seen < num_values) {
    ParquetPageHeader page;
    SPHERET_RETURN_IF_ERROR(ReadHeaderAt(read, offset, &page));
    const bool data = page.type == static_cast<int32_t>(ParquetPageType::kData) ||
                      page.type == static_cast<int32_t>(ParquetPageType::kDataV2);
    // Arrow decompresses data and dictionary pages; it skips others (index pages) unread.
    const bool decompressed =
        data || page.type == static_cast<int32_t>(ParquetPageType::kDictionary);
    const bool values_fit = ParquetValuesFit(page.uncompressed_bytes, page.values, max_value_bytes);
    if (decompressed && (!values_fit || page.uncompressed_bytes > max_page_bytes)) {
      scan->over_limit = true;
      scan->value_over_limit = !values_fit;
      scan->page = page;
      scan->page_offset = offset;
      scan->first_value = data ? seen : 0;
      return absl::OkStatus();
    }
    if (decompressed)
      scan->max_page_bytes = std::max(scan->max_page_bytes, page.uncompressed_bytes);
    if (data) seen += page.values;
    // A page past the chunk's end ends the scan: Arrow's reader says what is wrong with it.
    const int64_t page_bytes = page.header_bytes + page.compressed_bytes;  // below 2^32
    if (page_bytes > end - offset) break;
    offset += page_bytes;
  }
  return absl::OkStatus();
}

}  // namespace spheret::train
