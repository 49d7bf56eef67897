// worker/text/parquet.h on files written here by Arrow's own Parquet writer: each type a row can
// hold becomes the JSON that the row's JSONL line parses to (to the integer's signedness); a text
// column's nulls, empty strings, row places and progress; refusals naming the file, row group,
// row and column. And the link: with libparquet (which carries its own OpenSSL) in the program,
// SHA-256 still comes from the system's libcrypto. Built only with Arrow, as C++20 like parquet.cc.
#include "worker/text/parquet.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/json/from_string.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/sha256.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Column {
  std::string name;
  std::shared_ptr<arrow::Array> values;
};

std::shared_ptr<arrow::Array> FromJson(const std::shared_ptr<arrow::DataType>& type,
                                       const std::string& values) {
  return arrow::json::ArrayFromJSONString(type, values).ValueOrDie();
}

// Equal as JSON and of the same JSON types throughout (5 parsed is unsigned, -5 signed).
bool SameJson(const json& a, const json& b) {
  if (a.type() != b.type() || a != b) return false;
  if (a.is_object()) {
    for (const auto& [key, value] : a.items()) {
      if (!SameJson(value, b.at(key))) return false;
    }
  } else if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameJson(a[i], b[i])) return false;
    }
  }
  return true;
}

class ParquetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spheret_parquet_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The columns as a Parquet file (zstd, dictionary pages) of row groups of `group_rows` rows,
  // with the Arrow schema stored (large_string, dictionary and string_view come back as such).
  std::string Write(const std::string& name, const std::vector<Column>& columns,
                    int64_t group_rows) {
    return WriteWith(name, columns, group_rows,
                     parquet::WriterProperties::Builder()
                         .compression(parquet::Compression::ZSTD)
                         ->enable_dictionary()
                         ->build());
  }
  std::string WriteWith(const std::string& name, const std::vector<Column>& columns,
                        int64_t group_rows,
                        const std::shared_ptr<parquet::WriterProperties>& properties) {
    arrow::FieldVector fields;
    arrow::ArrayVector arrays;
    for (const Column& column : columns) {
      fields.push_back(arrow::field(column.name, column.values->type()));
      arrays.push_back(column.values);
    }
    const auto table = arrow::Table::Make(arrow::schema(fields), arrays);
    const std::string path = (dir_ / name).string();
    auto sink = arrow::io::FileOutputStream::Open(path).ValueOrDie();
    auto arrow_properties = parquet::ArrowWriterProperties::Builder().store_schema()->build();
    const arrow::Status status = parquet::arrow::WriteTable(
        *table, arrow::default_memory_pool(), sink, group_rows, properties, arrow_properties);
    EXPECT_TRUE(status.ok()) << status.ToString();
    EXPECT_TRUE(sink->Close().ok());
    return path;
  }

  fs::path dir_;
};

// A column of each kind of Arrow value a task file may hold, four rows each, nulls among them.
std::vector<Column> EveryKindOfColumn() {
  const auto choices = arrow::struct_(
      {arrow::field("text", arrow::list(arrow::utf8())), arrow::field("label", arrow::utf8())});
  return {
      {"s", FromJson(arrow::utf8(), R"(["a", "Café 🙂", null, ""])")},
      {"i8", FromJson(arrow::int8(), "[-1, 0, 127, null]")},
      {"i64", FromJson(arrow::int64(), "[-9223372036854775808, 9223372036854775807, 5, null]")},
      {"u64", FromJson(arrow::uint64(), "[18446744073709551615, 0, 1, 2]")},
      {"f64", FromJson(arrow::float64(), "[0.5, -1e300, 3.25, null]")},
      {"f32", FromJson(arrow::float32(), "[0.25, -2.5, 1024.0, null]")},
      {"b", FromJson(arrow::boolean(), "[true, false, null, true]")},
      {"n", FromJson(arrow::null(), "[null, null, null, null]")},
      {"choices", FromJson(choices, R"([{"text": ["x", "y"], "label": "A"}, null,
                                        {"text": [], "label": null}, {"text": [null], "label": "C"}])")},
      {"ll", FromJson(arrow::large_list(arrow::int32()), "[[1, -2], [], null, [3]]")},
      {"fl", FromJson(arrow::fixed_size_list(arrow::int16(), 2), "[[1, 2], [3, 4], null, [5, 6]]")},
      {"ls", FromJson(arrow::large_utf8(), R"(["l0", null, "l2", "l3"])")},
      {"sv", FromJson(arrow::utf8_view(), R"(["v0", "v1", null, "a longer string than twelve"])")},
      {"d", arrow::json::DictArrayFromJSONString(arrow::dictionary(arrow::int32(), arrow::utf8()),
                                                 "[0, 1, null, 0]", R"(["red", "green"])")
                .ValueOrDie()},
  };
}

// The JSONL lines of EveryKindOfColumn's rows.
const char* const kEveryKindOfColumnRows[] = {
    R"({"s": "a", "i8": -1, "i64": -9223372036854775808, "u64": 18446744073709551615,
        "f64": 0.5, "f32": 0.25, "b": true, "n": null, "choices": {"text": ["x", "y"],
        "label": "A"}, "ll": [1, -2], "fl": [1, 2], "ls": "l0", "sv": "v0", "d": "red"})",
    R"({"s": "Café 🙂", "i8": 0, "i64": 9223372036854775807, "u64": 0, "f64": -1e300,
        "f32": -2.5, "b": false, "n": null, "choices": null, "ll": [], "fl": [3, 4],
        "ls": null, "sv": "v1", "d": "green"})",
    R"({"s": null, "i8": 127, "i64": 5, "u64": 1, "f64": 3.25, "f32": 1024.0, "b": null,
        "n": null, "choices": {"text": [], "label": null}, "ll": null, "fl": null, "ls": "l2",
        "sv": null, "d": null})",
    R"({"s": "", "i8": null, "i64": null, "u64": 2, "f64": null, "f32": null, "b": true,
        "n": null, "choices": {"text": [null], "label": "C"}, "ll": [3], "fl": [5, 6],
        "ls": "l3", "sv": "a longer string than twelve", "d": "red"})",
};

TEST_F(ParquetTest, RowsAreTheJsonOfTheirJsonlLines) {
  const std::string path = Write("rows.parquet", EveryKindOfColumn(), 3);
  const std::vector<std::string> lines(std::begin(kEveryKindOfColumnRows),
                                       std::end(kEveryKindOfColumnRows));
  std::vector<ParquetRow> rows;
  const absl::Status status = ReadParquetRows(path, [&](json& document, const ParquetRow& row) {
    const json expected = json::parse(lines.at(static_cast<size_t>(row.row)));
    EXPECT_TRUE(SameJson(document, expected)) << "row " << row.row << ":\n"
                                              << document.dump() << "\n"
                                              << expected.dump();
    rows.push_back(row);
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[2].row_group, 0);
  EXPECT_EQ(rows[3].row_group, 1);  // three rows a group
  EXPECT_EQ(rows[3].bytes_done, static_cast<int64_t>(fs::file_size(path)));
}

TEST_F(ParquetTest, TextSkipsNullsKeepsEmptyStringsAndSaysWhereEachRowIs) {
  const std::string path =
      Write("text.parquet",
            {{"text", FromJson(arrow::utf8(), R"(["a", null, "", "b", null, "c", "d"])")},
             {"id", FromJson(arrow::int64(), "[0, 1, 2, 3, 4, 5, 6]")}},
            3);
  std::vector<std::string> texts;
  std::vector<ParquetRow> rows;
  ParquetTextCounts counts;
  ASSERT_TRUE(ReadParquetText(
                  path, "text",
                  [&](std::string_view text, const ParquetRow& row) {
                    texts.emplace_back(text);
                    rows.push_back(row);
                    return absl::OkStatus();
                  },
                  {}, &counts)
                  .ok());
  EXPECT_EQ(texts, (std::vector<std::string>{"a", "", "b", "c", "d"}));
  EXPECT_EQ(counts.values, 5);  // issue 44, item 13: the nulls skipped are counted
  EXPECT_EQ(counts.nulls, 2);
  const std::vector<std::pair<int, int64_t>> expected = {{0, 0}, {0, 2}, {1, 3}, {1, 5}, {2, 6}};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(std::make_pair(rows[i].row_group, rows[i].row), expected[i]) << i;
    if (i > 0) {
      EXPECT_GT(rows[i].bytes_done, rows[i - 1].bytes_done);
    }
  }
  EXPECT_EQ(rows.back().bytes_done, static_cast<int64_t>(fs::file_size(path)));
  // The callback's error ends the read, as it is.
  int calls = 0;
  const absl::Status stopped =
      ReadParquetText(path, "text", [&](std::string_view, const ParquetRow&) {
        return ++calls == 2 ? absl::CancelledError("enough") : absl::OkStatus();
      });
  EXPECT_EQ(stopped, absl::CancelledError("enough"));
  EXPECT_EQ(calls, 2);
}

// "ok", "ok", ..., with `bad` at row `at`: invalid UTF-8 that Arrow does not check.
std::shared_ptr<arrow::Array> TextsWith(const std::string& bad, int at, int rows) {
  arrow::StringBuilder builder;
  for (int i = 0; i < rows; ++i) EXPECT_TRUE(builder.Append(i == at ? bad : "ok").ok());
  return builder.Finish().ValueOrDie();
}

TEST_F(ParquetTest, InvalidUtf8IsNamedWithTheFileRowGroupRowAndColumn) {
  const std::string path = Write("utf8.parquet", {{"text", TextsWith("ab\xED\xA0\x80", 4, 6)}}, 3);
  const absl::Status text = ReadParquetText(
      path, "text", [](std::string_view, const ParquetRow&) { return absl::OkStatus(); });
  EXPECT_EQ(text.message(), path + " row group 1 row 4: invalid UTF-8 at byte 3 of column 'text'");
  const auto record = arrow::StructArray::Make({TextsWith("\xC0\xAF", 1, 2)}, {"t"}).ValueOrDie();
  const std::string nested = Write("nested.parquet", {{"st", record}}, 10);
  const absl::Status rows =
      ReadParquetRows(nested, [](json&, const ParquetRow&) { return absl::OkStatus(); });
  EXPECT_EQ(rows.message(),
            nested + " row group 0 row 1: invalid UTF-8 at byte 1 of column 'st.t'");
}

// Issue 44, item 3: a value over max_value_bytes is refused naming its row and the limit, in
// text and in rows; a page over the page limit is refused from its header before Arrow
// decompresses it, named by its first row (a dictionary page by its row group's first row).
TEST_F(ParquetTest, AValueOverTheLimitIsRefusedNamingItsRowAndTheLimit) {
  const std::string path =
      Write("long.parquet", {{"text", TextsWith(std::string(2000, 'a'), 4, 6)}}, 3);
  ParquetReadOptions options;
  options.max_value_bytes = 1000;
  const auto ok = [](auto&&...) { return absl::OkStatus(); };
  const std::string expected =
      path +
      " row group 1 row 4: a value of 2000 bytes in column 'text', over the limit of 1000 bytes";
  EXPECT_EQ(ReadParquetText(path, "text", ok, options).message(), expected);
  EXPECT_EQ(ReadParquetRows(path, ok, options).message(), expected);
  options.max_value_bytes = 2000;
  EXPECT_EQ(ReadParquetText(path, "text", ok, options), absl::OkStatus());
}

TEST_F(ParquetTest, APageOverTheLimitIsRefusedBeforeItIsRead) {
  const std::vector<Column> columns = {{"text", TextsWith(std::string(200000, 'a'), 4, 6)}};
  const auto ok = [](auto&&...) { return absl::OkStatus(); };
  ParquetReadOptions options;
  options.max_page_bytes = 100000;
  // One value a page (write batches of 1, pages of 1 byte): the page of row 4 alone.
  const std::string plain = WriteWith("plain.parquet", columns, 3,
                                      parquet::WriterProperties::Builder()
                                          .compression(parquet::Compression::ZSTD)
                                          ->disable_dictionary()
                                          ->write_batch_size(1)
                                          ->data_pagesize(1)
                                          ->build());
  std::string message(ReadParquetText(plain, "text", ok, options).message());
  EXPECT_EQ(message.rfind(plain + " row group 1 row 4: column 'text' holds 2000", 0), 0u)
      << message;
  EXPECT_NE(message.find(" bytes in the page of rows 4 to 4 at byte "), std::string::npos)
      << message;
  EXPECT_NE(message.find("over the limit of 100000 bytes on a page"), std::string::npos) << message;
  message = std::string(ReadParquetRows(plain, ok, options).message());
  EXPECT_NE(message.find("row group 1 row 4: column 'text' holds 2000"), std::string::npos)
      << message;
  // Dictionary-encoded, the value is in the row group's dictionary page.
  const std::string dictionary = Write("dictionary.parquet", columns, 3);
  message = std::string(ReadParquetText(dictionary, "text", ok, options).message());
  EXPECT_EQ(message.rfind(dictionary + " row group 1 row 3: column 'text' holds 2000", 0), 0u)
      << message;
  EXPECT_NE(message.find(" bytes in its dictionary page at byte "), std::string::npos) << message;
  // A page of one value over max_value_bytes is refused from its header, naming the value's row.
  options = ParquetReadOptions{1000, 0};
  message = std::string(ReadParquetText(plain, "text", ok, options).message());
  EXPECT_EQ(message.rfind(plain + " row group 1 row 4: column 'text' holds 2000", 0), 0u)
      << message;
  EXPECT_NE(message.find("more than its 1 value(s) can hold at the limit of 1000 bytes a value"),
            std::string::npos)
      << message;
  EXPECT_EQ(ParquetPageLimit({}), int64_t{1} << 30);
  EXPECT_EQ(ParquetPageLimit({int64_t{1} << 40, 0}), (int64_t{1} << 31) - 1);
}

TEST_F(ParquetTest, ColumnsOfOtherTypesAreRefusedNamingTheType) {
  const std::string path = Write("types.parquet",
                                 {{"n", FromJson(arrow::int64(), "[1]")},
                                  {"ts", FromJson(arrow::timestamp(arrow::TimeUnit::MILLI), "[0]")},
                                  {"raw", FromJson(arrow::binary(), R"(["x"])")}},
                                 10);
  const auto never = [](auto&&...) {
    ADD_FAILURE() << "a row was read";
    return absl::OkStatus();
  };
  EXPECT_EQ(ReadParquetText(path, "n", never).message(),
            path + ": column 'n' is int64, not text (string, large_string or string_view)");
  EXPECT_EQ(ReadParquetText(path, "text", never).message(),
            path +
                ": no column 'text' (columns: n, ts, raw; name the documents' column with "
                "--text-field)");
  EXPECT_EQ(ReadParquetRows(path, never).message(),
            path +
                ": column 'ts' is timestamp[ms], which has no JSON form here (struct, list, "
                "string, integer, float, bool, null)");
}

TEST_F(ParquetTest, AFileThatIsNotParquetIsNamed) {
  const std::string path = (dir_ / "not.parquet").string();
  std::ofstream(path) << "PAR1 and then nothing of the format";
  const absl::Status status = ReadParquetText(
      path, "text", [](std::string_view, const ParquetRow&) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message().rfind(path + ": not a readable Parquet file (", 0), 0u) << status;
}

// libparquet exports a whole OpenSSL of its own; cmake/Arrow.cmake puts the system's libcrypto
// first, so base/sha256.cc binds to it (and computes SHA-256, FIPS 180-2's "abc" example).
TEST(ParquetLinkTest, Sha256StillComesFromTheSystemsLibcrypto) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  void* digest = dlsym(RTLD_DEFAULT, "EVP_Digest");
  Dl_info info{};
  ASSERT_NE(digest, nullptr);
  ASSERT_NE(dladdr(digest, &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libcrypto.so"), std::string::npos) << info.dli_fname;
}

}  // namespace
}  // namespace spheret::train
