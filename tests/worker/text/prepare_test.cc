// prepare's JSONL errors and the safe cuts between the pieces it tokenizes in parallel.
#include "worker/text/prepare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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

TEST(PrepareJsonlTest, SafeCutsFallAfterANewlineBetweenNonSpaces) {
  EXPECT_EQ(SafeCut("ab\ncd\nef", 0), 3u);
  EXPECT_EQ(SafeCut("ab\ncd\nef", 4), 6u);
  EXPECT_EQ(SafeCut("a \nb c\n d", 0), 9u) << "a space before or after the newline: no cut";
  EXPECT_EQ(SafeCut("a\xc2\xa0\nb", 0), 5u) << "nor after a non-ASCII character";
}

}  // namespace
}  // namespace spheret::train
