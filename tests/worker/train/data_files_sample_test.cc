// A token file truncated under SampleBatch's reader (issue 28): an error, not SIGBUS.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "tests/worker/text/data_files_fixture.h"
#include "worker/text/data_files.h"
#include "worker/train/dataset.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

// Before: TokenFile mapped the file and a batch read past the truncated end died of SIGBUS.
TEST_F(DataFilesTest, AFileTruncatedInPlaceUnderAReaderIsAnErrorNotSigbus) {
  WriteTokens(dir_ / "t.bin", std::vector<uint16_t>(1 << 16, 5));
  TokenFile file;
  ASSERT_EQ(file.Open((dir_ / "t.bin").string(), 256), absl::OkStatus());
  fs::resize_file(dir_ / "t.bin", 64);
  torch::Generator generator = at::detail::createCPUGenerator(1);
  const auto batch = SampleBatch(file, 8, 1024, generator);
  ASSERT_FALSE(batch.ok());
  EXPECT_TRUE(
      Has(std::string(batch.status().message()), "truncated or rewritten in place while in use"));
  // A file replaced by rename (as prepare does) leaves the open one readable as it was.
  WriteTokens(dir_ / "u.bin", std::vector<uint16_t>(1 << 16, 5));
  ASSERT_EQ(file.Open((dir_ / "u.bin").string(), 256), absl::OkStatus());
  WriteTokens(dir_ / "v.bin", {1, 2});
  fs::rename(dir_ / "v.bin", dir_ / "u.bin");
  EXPECT_TRUE(SampleBatch(file, 8, 1024, generator).ok());
}

}  // namespace
}  // namespace spheret::train
