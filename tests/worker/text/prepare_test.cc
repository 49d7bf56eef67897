// prepare's JSONL errors, a corpus too small to split, a Parquet input in a build with and without
// Parquet, and the safe cuts between the pieces it tokenizes in parallel.
#include "worker/text/prepare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "worker/text/parquet.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

TEST(PrepareJsonlTest, NamesTheFileAndLineOfABadDocument) {
  const fs::path dir = fs::temp_directory_path() / ("spheret_jsonl_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a.jsonl") << "{\"text\": \"fine\"}\n[1, 2]\n";
  std::ofstream(dir / "b.jsonl") << "{\"text\": \"fine\"}\n{\"content\": \"x\"}\n";
  PrepareStats report;
  const std::string not_object = std::string(
      PrepareText({{(dir / "a.jsonl").string()}, (dir / "o").string(), 0.1, ""}, &report)
          .message());
  EXPECT_NE(not_object.find("a.jsonl line 2: not a JSON object"), std::string::npos) << not_object;
  const std::string no_field = std::string(
      PrepareText({{(dir / "b.jsonl").string()}, (dir / "o").string(), 0.1, ""}, &report)
          .message());
  EXPECT_NE(no_field.find("b.jsonl line 2: no string field 'text'"), std::string::npos) << no_field;
  fs::remove_all(dir);
}

// A .parquet input is read as Parquet: a foreign file is refused naming it; a build without Arrow
// refuses it saying how to enable Parquet (the tests of Parquet itself: parquet_test, and
// tests/worker/lm/parquet_prepare_test.py).
TEST(PrepareParquetTest, AForeignFileIsRefusedOrTheBuildSaysHowToReadParquet) {
  const fs::path dir = fs::temp_directory_path() / ("spheret_pq_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "x.parquet").string();
  std::ofstream(file) << "{\"text\": \"JSONL, not Parquet\"}\n";
  PrepareStats report;
  const absl::Status status = PrepareText({{file}, (dir / "o").string(), 0.1, ""}, &report);
  const std::string message(status.message());
  EXPECT_EQ(message.rfind(file + ": ", 0), 0u) << message;
  if (ParquetEnabled()) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_NE(message.find("not a readable Parquet file"), std::string::npos) << message;
  } else {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << message;
    EXPECT_NE(message.find("make deps"), std::string::npos) << message;
    EXPECT_NE(message.find("-DARROW_ROOT="), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(dir / "o" / "train.bin"));
  fs::remove_all(dir);
}

// A split of fewer than 2 tokens cannot be trained on: refused saying so, nothing published.
TEST(PrepareJsonlTest, ACorpusTooSmallToSplitIsRefusedSayingSo) {
  const fs::path dir = fs::temp_directory_path() / ("spheret_tiny_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a.jsonl") << "{\"text\": \"hi\"}\n";
  PrepareStats report;
  const absl::Status status =
      PrepareText({{(dir / "a.jsonl").string()}, (dir / "o").string(), 0.1, ""}, &report);
  const std::string message(status.message());
  EXPECT_NE(message.find("the corpus is too small: its train split has 1 token(s)"),
            std::string::npos)
      << message;
  EXPECT_FALSE(fs::exists(dir / "o" / "train.bin"));
  fs::remove_all(dir);
}

TEST(PrepareJsonlTest, SafeCutsFallAfterANewlineBetweenNonSpaces) {
  EXPECT_EQ(SafeCut("ab\ncd\nef", 0), 3u);
  EXPECT_EQ(SafeCut("ab\ncd\nef", 4), 6u);
  EXPECT_EQ(SafeCut("a \nb c\n d", 0), 9u) << "a space before or after the newline: no cut";
  EXPECT_EQ(SafeCut("a\xc2\xa0\nb", 0), 5u) << "nor after a non-ASCII character";
}

}  // namespace
}  // namespace spheret::train
