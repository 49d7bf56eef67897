// Hostile and damaged data sets (issue 28, items 3 and 4): ids at or above vocab_size, counts that
// differ from meta.json, files truncated under a reader, a prepare that fails half way.
#include "worker/text/data_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/worker/text/data_files_fixture.h"
#include "worker/text/prepare.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

TEST_F(DataFilesTest, IdsAtOrAboveVocabSizeAreNamedWithFileAndPosition) {
  WriteTokens(dir_ / "t.bin", {1, 2, 3, 300, 4, 5});
  TokenFile file;
  ASSERT_EQ(file.Open((dir_ / "t.bin").string(), 256), absl::OkStatus());
  std::vector<uint16_t> out(6);
  EXPECT_EQ(file.Read(0, 3, out.data()), absl::OkStatus());
  const std::string message(file.Read(0, 6, out.data()).message());
  EXPECT_TRUE(Has(message, "t.bin: token id 300 at token 3 is not below vocab_size 256"));
  EXPECT_TRUE(Has(std::string(file.Check(100).message()), "token id 300"));
  ASSERT_EQ(file.Open((dir_ / "t.bin").string(), 301), absl::OkStatus());
  EXPECT_EQ(file.Check(100), absl::OkStatus());
}

TEST_F(DataFilesTest, SampledCheckReachesTheLastTokenOfALargeFile) {
  std::vector<uint16_t> ids(1 << 20, 7);
  ids.back() = 9000;
  WriteTokens(dir_ / "big.bin", ids);
  TokenFile file;
  ASSERT_EQ(file.Open((dir_ / "big.bin").string(), 256), absl::OkStatus());
  int64_t checked = 0;
  const absl::Status status = file.Check(1 << 14, [&](int64_t done, int64_t) { checked = done; });
  EXPECT_TRUE(Has(std::string(status.message()), "token id 9000 at token 1048575"));
  ids.back() = 7;
  ids[1 << 19] = 9000;  // between the samples: only the whole check finds it
  WriteTokens(dir_ / "big.bin", ids);
  ASSERT_EQ(file.Open((dir_ / "big.bin").string(), 256), absl::OkStatus());
  EXPECT_EQ(file.Check(1 << 14, [&](int64_t done, int64_t) { checked = done; }), absl::OkStatus());
  EXPECT_LE(checked, 1 << 14);
  EXPECT_TRUE(Has(std::string(file.Check(file.size()).message()), "token id 9000"));
}

TEST_F(DataFilesTest, CountsAndFieldsOfMetaJsonAreChecked) {
  PrepareStats report;
  ASSERT_EQ(PrepareText({{(dir_ / "in").string()}, (dir_ / "out").string(), 0.1, ""}, &report),
            absl::OkStatus());
  DatasetMeta meta;
  ASSERT_EQ(ReadDatasetMeta((dir_ / "out").string(), &meta), absl::OkStatus());
  EXPECT_EQ(meta.train_tokens, 900);
  EXPECT_EQ(meta.val_tokens, 100);
  EXPECT_EQ(CheckDataset((dir_ / "out").string(), nullptr, &meta), absl::OkStatus());
  fs::resize_file(dir_ / "out" / "val.bin", 100);  // 50 tokens
  EXPECT_TRUE(
      Has(std::string(CheckDataset((dir_ / "out").string(), nullptr, &meta).message()),
          "val.bin has 50 tokens but " + (dir_ / "out" / "meta.json").string() + " says 100"));
  for (const auto& [text, error] : std::vector<std::pair<std::string, std::string>>{
           {R"({"vocab_size": "256"})", "no integer 'vocab_size'"},
           {R"({"vocab_size": 70000})",
            "vocab_size must be in [1, 65536] for uint16 tokens, got 70000"},
           {R"({"vocab_size": 256, "train_tokens": -1})", "'train_tokens' must be a non-negative"},
           {R"({"vocab_size": 256, "tokenizer": 3})", "'tokenizer' must be a string"},
           {R"([1, 2])", "no integer 'vocab_size'"},
           {"{\"vocab_size\": 2", "not valid JSON"}}) {
    std::ofstream(dir_ / "out" / "meta.json", std::ios::trunc) << text;
    EXPECT_TRUE(Has(std::string(ReadDatasetMeta((dir_ / "out").string(), &meta).message()), error))
        << text;
  }
  fs::resize_file(dir_ / "out" / "meta.json", kMaxMetaBytes + 1);
  EXPECT_TRUE(Has(std::string(ReadDatasetMeta((dir_ / "out").string(), &meta).message()),
                  "over the limit of 16777216"));
}

// Issue 44, item 13: a key named twice in meta.json took its last value without a word.
TEST_F(DataFilesTest, HostileInputAKeyNamedTwiceInMetaJsonIsRefusedNamingKeyAndFile) {
  fs::create_directories(dir_ / "out");
  const std::string path = (dir_ / "out" / "meta.json").string();
  DatasetMeta meta;
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"vocab_size": 256, "tokenizer": "byte", "vocab_size": 300})", "vocab_size"},
           {R"({"vocab_size": 256, "x": [{"a": 1, "b": 2, "a": 3}]})", "a"}}) {
    std::ofstream(path, std::ios::trunc) << text;
    const absl::Status status = ReadDatasetMeta((dir_ / "out").string(), &meta);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(Has(std::string(status.message()),
                    path + ": the key '" + key + "' appears twice in one object"))
        << status;
  }
  std::ofstream(path, std::ios::trunc) << R"({"vocab_size": 256, "x": {"vocab_size": 1}})";
  EXPECT_EQ(ReadDatasetMeta((dir_ / "out").string(), &meta), absl::OkStatus());
  EXPECT_EQ(meta.vocab_size, 256);
}

// Before: prepare truncated train.bin and val.bin first; a failed re-prepare left 0-byte files
// under the old meta.json.
TEST_F(DataFilesTest, AFailedPrepareLeavesTheEarlierDataSetWhole) {
  PrepareStats report;
  const std::string out = (dir_ / "out").string();
  ASSERT_EQ(PrepareText({{(dir_ / "in").string()}, out, 0.1, ""}, &report), absl::OkStatus());
  const std::string train = Slurp(dir_ / "out" / "train.bin"),
                    val = Slurp(dir_ / "out" / "val.bin");
  const std::string meta = Slurp(dir_ / "out" / "meta.json");
  std::ofstream(dir_ / "bad.jsonl") << "{\"text\": \"fine\"}\n{\"text\": \"\\ud800\"}\n";
  const absl::Status failed = PrepareText({{(dir_ / "bad.jsonl").string()}, out, 0.1, ""}, &report);
  EXPECT_TRUE(Has(std::string(failed.message()), "bad.jsonl line 2: a lone surrogate"));
  EXPECT_EQ(Slurp(dir_ / "out" / "train.bin"), train);
  EXPECT_EQ(Slurp(dir_ / "out" / "val.bin"), val);
  EXPECT_EQ(Slurp(dir_ / "out" / "meta.json"), meta);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir_ / "out"))
    left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"meta.json", "train.bin", "val.bin"}));
}

TEST_F(DataFilesTest, NonRegularAndOddFilesAreRefused) {
  TokenFile file;
  EXPECT_TRUE(Has(std::string(file.Open(dir_.string()).message()), "not a regular file"));
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_TRUE(Has(std::string(file.Open((dir_ / "fifo").string()).message()),  // does not block
                  "not a regular file"));
  std::ofstream(dir_ / "odd.bin") << "abc";
  EXPECT_TRUE(Has(std::string(file.Open((dir_ / "odd.bin").string()).message()),
                  "3 bytes; a token file holds whole 2-byte tokens"));
}

}  // namespace
}  // namespace spheret::train
