#include "worker/train/dataset.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "worker/text/prepare.h"

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
