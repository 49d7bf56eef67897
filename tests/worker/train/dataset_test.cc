#include "worker/train/dataset.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "worker/train/prepare.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spheret_dataset_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "in");
    std::ofstream(dir_ / "in" / "a.txt") << std::string(900, 'a');
    std::ofstream(dir_ / "in" / "b.txt") << std::string(100, 'b');
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DatasetTest, PreparesByteLevelSplitsAndSamplesShiftedWindows) {
  PrepareStats report;
  ASSERT_EQ(PrepareText({{(dir_ / "in").string()}, (dir_ / "out").string(), 0.1, ""}, &report),
            absl::OkStatus());
  EXPECT_EQ(report.files, 2);
  EXPECT_EQ(report.train_tokens, 900);  // Files in name order: all 'a' go to train ...
  EXPECT_EQ(report.val_tokens, 100);    // ... and the 'b' tail to val.
  DatasetMeta meta;
  ASSERT_EQ(ReadDatasetMeta((dir_ / "out").string(), &meta), absl::OkStatus());
  EXPECT_EQ(meta.vocab_size, 256);
  EXPECT_EQ(meta.tokenizer, "byte");
  TokenFile val;
  ASSERT_EQ(val.Open((dir_ / "out" / "val.bin").string()), absl::OkStatus());
  ASSERT_EQ(val.size(), 100);
  uint16_t first = 0;
  ASSERT_EQ(val.Read(0, 1, &first), absl::OkStatus());
  EXPECT_EQ(first, 'b');
  // Windows: y is x shifted by one, and both are slices of the file.
  std::ofstream(dir_ / "ramp.bin", std::ios::binary)
      .write(
          reinterpret_cast<const char*>(std::vector<uint16_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}.data()),
          20);
  TokenFile ramp;
  ASSERT_EQ(ramp.Open((dir_ / "ramp.bin").string()), absl::OkStatus());
  torch::Generator generator = at::detail::createCPUGenerator(1);
  absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> batch =
      SampleBatch(ramp, 64, 4, generator);
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto [x, y] = *batch;
  EXPECT_TRUE(torch::equal(y, x + 1));
  EXPECT_TRUE(torch::equal(x.select(1, 1), x.select(1, 0) + 1));
  EXPECT_EQ(x.min().item<int64_t>(), 0);
  EXPECT_EQ(y.max().item<int64_t>(), 9);  // The last window [5, 9) reaches the last token.
}

TEST_F(DatasetTest, ClearErrorsForMissingAndMalformedFiles) {
  TokenFile file;
  EXPECT_NE(file.Open((dir_ / "nope.bin").string()).message().find("nope.bin"), std::string::npos);
  std::ofstream(dir_ / "odd.bin") << "abc";
  EXPECT_NE(file.Open((dir_ / "odd.bin").string()).message().find("not a uint16 token file"),
            std::string::npos);
  PrepareStats report;
  EXPECT_NE(PrepareText({{(dir_ / "missing").string()}, (dir_ / "o").string(), 0.1, ""}, &report)
                .message()
                .find("missing"),
            std::string::npos);
  std::vector<std::string> files;
  EXPECT_NE(BuiltinCorpusFiles("shakespeare", &files).message().find("unknown built-in corpus"),
            std::string::npos);
}

}  // namespace
}  // namespace spheret::train

namespace spheret::train {
namespace {

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
