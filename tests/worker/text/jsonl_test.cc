// JSONL lines of `spheret-lm prepare` (issue 28, item 12): errors name the file, the line and the
// cause (invalid UTF-8, a lone surrogate, a line over the limit), and an over-long line is refused
// while it is read, never held whole.
#include "worker/text/jsonl.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

namespace spheret::train {
namespace {

::testing::AssertionResult Has(const absl::Status& status, const std::string& part) {
  const std::string text(status.message());
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// All lines of `input`, or the first error.
absl::Status ReadAll(const std::string& input, int64_t limit, std::vector<std::string>* lines) {
  std::istringstream in(input);
  JsonlReader reader(&in, "in.jsonl", limit);
  for (;;) {
    std::string line;
    bool done = false;
    if (absl::Status error = reader.Next(&line, &done); !error.ok()) return error;
    if (done) return absl::OkStatus();
    lines->push_back(line);
  }
}

TEST(JsonlReaderTest, SplitsLinesAndCountsThem) {
  std::vector<std::string> lines;
  ASSERT_EQ(ReadAll("a\n\nbc\r\nlast", 100, &lines), absl::OkStatus());
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "", "bc\r", "last"}));
  lines.clear();
  ASSERT_EQ(ReadAll("a\n", 100, &lines), absl::OkStatus());
  EXPECT_EQ(lines, std::vector<std::string>{"a"});
  lines.clear();
  EXPECT_TRUE(Has(ReadAll("short\n" + std::string(101, 'x') + "\nz\n", 100, &lines),
                  "in.jsonl line 2: longer than the limit of 100 bytes for a JSONL line"));
  lines.clear();
  EXPECT_EQ(ReadAll(std::string(100, 'x'), 100, &lines), absl::OkStatus());  // at the limit
}

// A stream of `bytes` 'x' with no newline, made as it is read: an endless line of 1 GiB.
class EndlessLine : public std::streambuf {
 public:
  explicit EndlessLine(int64_t bytes) : left_(bytes), chunk_(1 << 16, 'x') {}
  int64_t read() const { return read_; }

 protected:
  int_type underflow() override {
    if (left_ <= 0) return traits_type::eof();
    const auto n = static_cast<size_t>(std::min<int64_t>(left_, chunk_.size()));
    left_ -= static_cast<int64_t>(n);
    read_ += static_cast<int64_t>(n);
    setg(chunk_.data(), chunk_.data(), chunk_.data() + n);
    return traits_type::to_int_type(chunk_[0]);
  }

 private:
  int64_t left_, read_ = 0;
  std::string chunk_;
};

// Before: std::getline held the whole line (a 2 GB line: "Cannot allocate memory", no line).
TEST(JsonlReaderTest, AnOverLongLineIsRefusedAfterTheLimitNotReadWhole) {
  EndlessLine source(int64_t{1} << 30);
  std::istream in(&source);
  JsonlReader reader(&in, "huge.jsonl", 1 << 20);
  std::string line;
  bool done = false;
  EXPECT_TRUE(
      Has(reader.Next(&line, &done), "huge.jsonl line 1: longer than the limit of 1048576"));
  EXPECT_LE(source.read(), 4 << 20);  // the limit and a read buffer, not the gigabyte
  EXPECT_LE(line.capacity(), size_t{4} << 20);
}

TEST(JsonlTextTest, TakesTheFieldAndNamesEachKindOfBadLine) {
  std::string text;
  ASSERT_EQ(ReadJsonlText(R"({"id": 1, "text": "h\u00e9llo \ud83d\ude00", "x": [{"text": 2}]})",
                          "text", &text),
            absl::OkStatus());
  EXPECT_EQ(text, "h\xc3\xa9llo \xf0\x9f\x98\x80");
  EXPECT_TRUE(
      Has(ReadJsonlText("{\"text\": \"ok\xff\"}", "text", &text), "invalid UTF-8 at byte 13"));
  EXPECT_TRUE(Has(ReadJsonlText("{\"text\": \"\xed\xa0\x80\"}", "text", &text),  // CESU surrogate
                  "invalid UTF-8 at byte 11"));
  EXPECT_TRUE(Has(ReadJsonlText("{\"text\": \"\xc0\xaf\"}", "text", &text),  // overlong '/'
                  "invalid UTF-8 at byte 11"));
  EXPECT_TRUE(Has(ReadJsonlText(R"({"text": "\ud800"})", "text", &text),
                  "a lone surrogate escape (\\uD800-\\uDFFF without its pair) at byte"));
  EXPECT_TRUE(Has(ReadJsonlText(R"({"text": "\udc00x"})", "text", &text), "lone surrogate"));
  EXPECT_TRUE(Has(ReadJsonlText(R"({"text": "a")", "text", &text), "not valid JSON at byte"));
  EXPECT_TRUE(Has(ReadJsonlText(R"(["text", "a"])", "text", &text), "not a JSON object"));
  EXPECT_TRUE(Has(ReadJsonlText(R"("text")", "text", &text), "not a JSON object"));
  EXPECT_TRUE(Has(ReadJsonlText(R"({"body": "a"})", "text", &text), "no string field 'text'"));
  EXPECT_TRUE(Has(ReadJsonlText(R"({"text": ["a"]})", "text", &text), "no string field 'text'"));
  EXPECT_TRUE(
      Has(ReadJsonlText(R"({"a": {"text": "nested"}})", "text", &text), "no string field 'text'"));
  // The reason never echoes the line.
  const std::string secret(10000, 's');
  const absl::Status bad = ReadJsonlText("{\"text\": \"" + secret + "\" junk}", "text", &text);
  EXPECT_LT(bad.message().size(), 300u) << bad;
}

TEST(JsonlTextTest, DeepNestingCostsNoTree) {
  std::string text;
  const std::string deep =
      "{\"a\": " + std::string(1 << 20, '[') + std::string(1 << 20, ']') + ", \"text\": \"t\"}";
  EXPECT_EQ(ReadJsonlText(deep, "text", &text), absl::OkStatus());
  EXPECT_EQ(text, "t");
}

// ReadJsonlText's answer for `line` is nlohmann's DOM parser's: OK exactly when the line is an
// object whose last top-level "text" is a string, with that string.
void ExpectParserAgrees(const std::string& line) {
  std::string text;
  const absl::Status status = ReadJsonlText(line, "text", &text);
  const nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const bool want = !parsed.is_discarded() && parsed.is_object() && parsed.contains("text") &&
                    parsed["text"].is_string();
  ASSERT_EQ(status.ok(), want) << "line: " << line << "\n" << status;
  if (want) {
    EXPECT_EQ(text, parsed["text"].get<std::string>()) << "line: " << line;
  }
}

// The one-pass scanner (worker/text/json_field.h) takes the common lines and leaves the rest to
// nlohmann's parser: either way the answer is the parser's, for each line, each of its prefixes
// and seeded one-byte changes of it.
TEST(JsonlTextTest, AnswersAsNlohmannsParserDoes) {
  const std::vector<std::string> lines = {
      R"({"id": 1, "text": "a\nb \"q\" \\ \/ \b\f\r\t \u00e9 \ud83d\ude00 \u0000 \uD834\uDD1E"})",
      R"( {"text":"x","text":"last"} )",
      R"({"text": "s", "n": [-0, 1.5, -12.25e3, 1E-2, true, false, null, {}, [], {"k": [{"text": 1}]}]})",
      R"({"te\u0078t": "escaped key", "big": 123456789012345678901234567890, "neg": -0.5})",
      R"({"text": "x", "text": 5})",
      "\xef\xbb\xbf{\"text\": \"after a byte order mark, caf\xc3\xa9\"}",
      R"({})",
  };
  const std::string bytes = "{}[]\":,\\u0123456789abcdefABCDEF.eE+-tfnrl \t\n\r\x01\x7f\xc3\xa9";
  std::mt19937 rng(11);
  for (const std::string& line : lines) {
    ExpectParserAgrees(line);
    for (size_t cut = 0; cut < line.size(); ++cut) ExpectParserAgrees(line.substr(0, cut));
    for (int i = 0; i < 3000; ++i) {
      std::string changed = line;
      changed[rng() % changed.size()] = bytes[rng() % bytes.size()];
      ExpectParserAgrees(changed);
    }
  }
}

}  // namespace
}  // namespace spheret::train
