// A data set's identity (worker/text/dataset_identity.h, issue 44, item 9): prepare stores the
// identity of the files it wrote in meta.json; a token changed in a sampled chunk, or a count,
// gives another identity, a copy the same, and check-data finds files changed since prepare; the
// resume check accepts the same data set, warns on a checkpoint that records none, and refuses
// another naming both.
#include "worker/text/dataset_identity.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "tests/worker/text/data_files_fixture.h"
#include "worker/text/prepare.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

using DatasetIdentityTest = DataFilesTest;

// The identity of the data set in `dir` (its meta.json's vocab_size and tokenizer).
std::string IdentityOf(const fs::path& dir) {
  DatasetMeta meta;
  EXPECT_EQ(ReadDatasetMeta(dir.string(), &meta), absl::OkStatus());
  TokenFile train, val;
  EXPECT_EQ(train.Open((dir / "train.bin").string(), meta.vocab_size), absl::OkStatus());
  EXPECT_EQ(val.Open((dir / "val.bin").string(), meta.vocab_size), absl::OkStatus());
  std::string id;
  EXPECT_EQ(ComputeDatasetId(train, val, meta.vocab_size, meta.tokenizer, &id), absl::OkStatus());
  return id;
}

TEST_F(DatasetIdentityTest, PrepareStoresTheIdentityOfTheFilesItWrote) {
  PrepareStats stats;
  ASSERT_EQ(PrepareText({{(dir_ / "in").string()}, (dir_ / "data").string(), 0.1, ""}, &stats),
            absl::OkStatus());
  DatasetMeta meta;
  ASSERT_EQ(ReadDatasetMeta((dir_ / "data").string(), &meta), absl::OkStatus());
  EXPECT_TRUE(std::regex_match(meta.dataset_id, std::regex("ds1:[0-9a-f]{32}"))) << meta.dataset_id;
  EXPECT_EQ(meta.dataset_id, IdentityOf(dir_ / "data"));
  // A copy is the same data set.
  fs::copy(dir_ / "data", dir_ / "copy");
  EXPECT_EQ(IdentityOf(dir_ / "copy"), meta.dataset_id);
}

// check-data compares meta.json's identity with the files': a token changed in place (a valid
// id, the counts kept) is found.
TEST_F(DatasetIdentityTest, CheckDataFindsFilesChangedAfterPrepare) {
  PrepareStats stats;
  const fs::path data = dir_ / "data";
  ASSERT_EQ(PrepareText({{(dir_ / "in").string()}, data.string(), 0.1, ""}, &stats),
            absl::OkStatus());
  DatasetMeta meta;
  ASSERT_EQ(CheckDataset(data.string(), nullptr, &meta), absl::OkStatus());
  const std::string prepared = meta.dataset_id;
  {
    std::fstream file(data / "train.bin", std::ios::in | std::ios::out | std::ios::binary);
    const uint16_t other = 'c';
    file.write(reinterpret_cast<const char*>(&other), 2);
  }
  EXPECT_EQ(CheckDataset(data.string(), nullptr, &meta).message(),
            (data / "meta.json").string() + ": 'dataset_id' is " + prepared +
                " but train.bin and val.bin are " + IdentityOf(data) +
                ": they were changed after prepare wrote them (prepare the data set again)");
}

TEST_F(DatasetIdentityTest, ATokenOrACountChangedGivesAnotherIdentity) {
  const fs::path data = dir_ / "data";
  fs::create_directories(data);
  std::ofstream(data / "meta.json") << R"({"vocab_size": 256, "tokenizer": "byte"})";
  // Over 2 MiB of train tokens: sampled in 64 chunks, the first and the last included.
  std::vector<uint16_t> train(3'000'000, 7), val(1000, 9);
  WriteTokens(data / "train.bin", train);
  WriteTokens(data / "val.bin", val);
  const std::string id = IdentityOf(data);
  train.back() = 8;  // the last token is in the last chunk
  WriteTokens(data / "train.bin", train);
  const std::string last_changed = IdentityOf(data);
  EXPECT_NE(last_changed, id);
  val.push_back(9);  // a count
  WriteTokens(data / "val.bin", val);
  EXPECT_NE(IdentityOf(data), last_changed);
  std::ofstream(data / "meta.json") << R"({"vocab_size": 300, "tokenizer": "byte"})";
  EXPECT_NE(IdentityOf(data), last_changed);
}

TEST(CheckSameDatasetTest, SameAcceptedUnrecordedWarnedOtherRefusedNamingBoth) {
  const DatasetIdentity a{"ds1:aaaa", "/data/a"}, a_copy{"ds1:aaaa", "/data/copy"},
      b{"ds1:bbbb", "/data/a"};
  std::string warning;
  EXPECT_EQ(CheckSameDataset(a, a_copy, &warning), absl::OkStatus());
  EXPECT_EQ(warning, "");
  EXPECT_EQ(CheckSameDataset({"", ""}, a, &warning), absl::OkStatus());
  EXPECT_EQ(warning,
            "the checkpoint records no data set identity (written before spheret recorded one): "
            "resuming on /data/a (ds1:aaaa) without knowing whether the run trained on it");
  const absl::Status other = CheckSameDataset(a, b, nullptr);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.message(),
            "the run trained on data set ds1:aaaa (/data/a), but /data/a is data set ds1:bbbb: it "
            "was rebuilt or changed since. Resume on the data the run trained on, or train again "
            "in another run folder");
}

}  // namespace
}  // namespace spheret::train
