// Parquet page headers read without Arrow (worker/text/parquet_pages.h, issue 44, item 3): the
// sizes of a header as Thrift's compact protocol writes it (fields Arrow adds skipped), a header
// cut short asks for more, deep nesting is refused without recursion past the limit, and a
// column chunk's scan stops at the first page over the limit, saying where its values start.
#include "worker/text/parquet_pages.h"

#include <gtest/gtest.h>

#include <string>

namespace spheret::train {
namespace {

// Compact-protocol bytes, written by hand as parquet.thrift lays out a PageHeader.
class Compact {
 public:
  Compact& Field(int delta, int type) {
    bytes_ += static_cast<char>(delta << 4 | type);
    return *this;
  }
  Compact& I32(int64_t value) {  // zigzag varint
    uint64_t zigzag = (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
    do {
      const auto low = static_cast<char>(zigzag & 0x7F);
      zigzag >>= 7;
      bytes_ += static_cast<char>(low | (zigzag != 0 ? 0x80 : 0));
    } while (zigzag != 0);
    return *this;
  }
  Compact& Binary(const std::string& value) {
    bytes_ += static_cast<char>(value.size());  // under 128
    bytes_ += value;
    return *this;
  }
  Compact& Stop() {
    bytes_ += '\0';
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

constexpr int kI32 = 5, kBinary = 8, kStruct = 12, kTrue = 1;
constexpr int64_t kNoValueLimit = int64_t{1} << 40;

// A header of `type` (0 data, 2 dictionary, 3 data v2) with `values`; a data page's header carries
// statistics (min and max as binary), a v2 page's its row count and is_compressed, as Arrow's do.
std::string Header(int type, int64_t uncompressed, int64_t compressed, int64_t values) {
  Compact c;
  c.Field(1, kI32).I32(type).Field(1, kI32).I32(uncompressed).Field(1, kI32).I32(compressed);
  c.Field(1, kI32).I32(12345);  // crc
  if (type == 0) {
    c.Field(1, kStruct).Field(1, kI32).I32(values).Field(1, kI32).I32(0);
    c.Field(1, kI32).I32(3).Field(1, kI32).I32(3);
    c.Field(1, kStruct).Field(5, kBinary).Binary("zz").Field(1, kBinary).Binary("aa").Stop();
    c.Stop();
  } else if (type == 2) {
    c.Field(3, kStruct).Field(1, kI32).I32(values).Field(1, kI32).I32(0).Field(1, kTrue).Stop();
  } else {
    c.Field(4, kStruct).Field(1, kI32).I32(values).Field(1, kI32).I32(0).Field(1, kI32).I32(values);
    c.Field(1, kI32).I32(0).Field(1, kI32).I32(2).Field(1, kI32).I32(0).Field(1, kTrue).Stop();
  }
  return c.Stop().bytes();
}

// A page: its header, then `compressed` bytes of data.
std::string Page(int type, int64_t uncompressed, int64_t compressed, int64_t values) {
  return Header(type, uncompressed, compressed, values) + std::string(compressed, 'x');
}

ParquetReadAt ReadFrom(const std::string& file) {
  return [&file](int64_t offset, int64_t bytes, std::string* out) {
    *out = offset < static_cast<int64_t>(file.size())
               ? file.substr(static_cast<size_t>(offset), static_cast<size_t>(bytes))
               : "";
    return absl::OkStatus();
  };
}

TEST(ParquetPagesTest, AHeaderGivesItsSizesAndValuesWhateverFieldsItAlsoHas) {
  for (const int type : {0, 2, 3}) {
    const std::string header = Header(type, 1 << 30, 33000, 7);
    ParquetPageHeader page;
    ASSERT_EQ(ParseParquetPageHeader(header + "data after it", &page), absl::OkStatus()) << type;
    EXPECT_EQ(page.type, type);
    EXPECT_EQ(page.uncompressed_bytes, 1 << 30);
    EXPECT_EQ(page.compressed_bytes, 33000);
    EXPECT_EQ(page.values, 7);
    EXPECT_EQ(page.header_bytes, static_cast<int64_t>(header.size()));
    for (size_t cut = 0; cut < header.size(); ++cut) {  // cut anywhere: read more
      EXPECT_TRUE(absl::IsOutOfRange(ParseParquetPageHeader(header.substr(0, cut), &page))) << cut;
    }
  }
}

TEST(ParquetPagesTest, BadHeadersAreRefusedSayingWhy) {
  ParquetPageHeader page;
  const absl::Status negative = ParseParquetPageHeader(Header(0, -5, 10, 1), &page);
  EXPECT_EQ(negative.message(), "uncompressed_page_size is -5");
  Compact missing;
  missing.Field(1, kI32).I32(0).Stop();
  EXPECT_EQ(ParseParquetPageHeader(missing.bytes(), &page).message(),
            "a required field (type, page sizes) is missing");
  // 100,000 nested structs in an unknown field: refused at depth 32, not a stack overflow.
  const std::string deep = std::string(1, '\x9C') + std::string(100000, '\x1C');
  EXPECT_EQ(ParseParquetPageHeader(deep, &page).message(), "nested deeper than 32");
  EXPECT_EQ(ParseParquetPageHeader(std::string(1, '\x9F'), &page).message(),
            "unknown compact type 15");
}

TEST(ParquetPagesTest, AScanStopsAtTheFirstPageOverTheLimitSayingWhereItsValuesStart) {
  const std::string head = "PAR1";
  const std::string chunk =
      Page(2, 300, 40, 3) + Page(0, 900, 50, 10) + Page(3, 1000, 60, 5) + Page(0, 5000, 70, 4);
  const std::string file = head + chunk + "footer";
  ParquetChunkScan scan;
  ASSERT_EQ(ScanColumnChunk(ReadFrom(file), 4, static_cast<int64_t>(chunk.size()), 19,
                            kNoValueLimit, 4096, &scan),
            absl::OkStatus());
  EXPECT_TRUE(scan.over_limit);
  EXPECT_EQ(scan.page.uncompressed_bytes, 5000);
  EXPECT_EQ(scan.first_value, 15);  // after 10 and 5 values: the dictionary holds no rows
  EXPECT_EQ(scan.page_offset, static_cast<int64_t>(file.find(Header(0, 5000, 70, 4))));
  EXPECT_EQ(scan.max_page_bytes, 1000);
  // Under a higher limit the scan ends once the data pages hold num_values (19), not at garbage.
  ASSERT_EQ(ScanColumnChunk(ReadFrom(file), 4, static_cast<int64_t>(chunk.size()) + 6, 19,
                            kNoValueLimit, 5000, &scan),
            absl::OkStatus());
  EXPECT_FALSE(scan.over_limit);
  EXPECT_EQ(scan.max_page_bytes, 5000);
  // A dictionary page over the limit: its values start at the chunk's first row.
  const std::string bomb = Page(2, 1 << 30, 33000, 1) + Page(0, 10, 5, 1);
  ASSERT_EQ(ScanColumnChunk(ReadFrom(bomb), 0, static_cast<int64_t>(bomb.size()), 1, kNoValueLimit,
                            1 << 26, &scan),
            absl::OkStatus());
  EXPECT_TRUE(scan.over_limit);
  EXPECT_FALSE(scan.value_over_limit);
  EXPECT_EQ(scan.page.type, static_cast<int32_t>(ParquetPageType::kDictionary));
  EXPECT_EQ(scan.first_value, 0);
  // Under a page limit it passes, the bomb's one value is over a 64 MiB limit on a value: known
  // from the header, as is a page of 4 values in 5000 bytes at 1000 bytes a value.
  ASSERT_EQ(ScanColumnChunk(ReadFrom(bomb), 0, static_cast<int64_t>(bomb.size()), 1, 64 << 20,
                            int64_t{1} << 31, &scan),
            absl::OkStatus());
  EXPECT_TRUE(scan.over_limit && scan.value_over_limit);
  ASSERT_EQ(ScanColumnChunk(ReadFrom(file), 4, static_cast<int64_t>(chunk.size()), 19, 1000,
                            1 << 20, &scan),
            absl::OkStatus());
  EXPECT_TRUE(scan.over_limit && scan.value_over_limit);
  EXPECT_EQ(scan.first_value, 15);
  EXPECT_TRUE(ParquetValuesFit(64 + 4 * 1006, 4, 1000));  // values, lengths and levels
  EXPECT_FALSE(ParquetValuesFit(64 + 4 * 1006 + 4, 4, 1000));
  EXPECT_TRUE(ParquetValuesFit(int64_t{1} << 31, 1, int64_t{1} << 62));  // no overflow
}

TEST(ParquetPagesTest, AHeaderTheFileCutsIsNamedByItsOffset) {
  const std::string page = Page(0, 100, 10, 1);
  const std::string file = page + page.substr(0, 5);
  ParquetChunkScan scan;
  EXPECT_EQ(ScanColumnChunk(ReadFrom(file), 0, static_cast<int64_t>(file.size()), 2, kNoValueLimit,
                            1000, &scan)
                .message(),
            "page header at byte " + std::to_string(page.size()) + ": the file ends in it");
  EXPECT_EQ(ScanColumnChunk(ReadFrom(file), -1, 10, 2, kNoValueLimit, 1000, &scan).message(),
            "a column chunk at byte -1 of 10 bytes");
}

}  // namespace
}  // namespace spheret::train
