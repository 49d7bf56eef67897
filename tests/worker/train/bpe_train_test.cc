// GPT-2 tokenization end to end: prepare a data set with the tiny vocabulary, train on it, sample.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tests/worker/text/gpt2_bpe_fixture.h"
#include "tests/worker/train/tiny_config.h"
#include "worker/text/data_files.h"
#include "worker/text/prepare.h"
#include "worker/train/hf_gpt2.h"
#include "worker/train/sample.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

TEST_F(Gpt2BpeTest, PreparesTrainsAndSamplesAGpt2DataSet) {
  fs::create_directories(dir_ / "text");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "hello world, hello there " + std::to_string(i) + "\n";
  std::ofstream(dir_ / "text" / "a.txt") << text;
  PrepareStats report;
  ASSERT_EQ(PrepareText({{(dir_ / "text").string()}, (dir_ / "data").string(), 0.1, dir_.string()},
                        &report),
            absl::OkStatus());
  DatasetMeta meta;
  ASSERT_EQ(ReadDatasetMeta((dir_ / "data").string(), &meta), absl::OkStatus());
  EXPECT_EQ(meta.tokenizer, "gpt2");
  EXPECT_EQ(meta.vocab_size, 262);
  std::vector<int64_t> expected = bpe_.Encode(text);
  expected.push_back(bpe_.eot());  // One end-of-text per file.
  EXPECT_EQ(report.train_tokens + report.val_tokens, static_cast<int64_t>(expected.size()));
  TokenFile train;
  ASSERT_EQ(train.Open((dir_ / "data" / "train.bin").string()), absl::OkStatus());
  std::vector<uint16_t> first(6);
  ASSERT_EQ(train.Read(0, 6, first.data()), absl::OkStatus());
  EXPECT_EQ(std::vector<int64_t>(first.begin(), first.end()),
            std::vector<int64_t>(expected.begin(), expected.begin() + 6));
  EXPECT_TRUE(fs::exists(dir_ / "data" / "vocab.bpe"));

  TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
  config.max_iters = 3;
  config.eval_interval = 3;
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  std::ostringstream sink, log;
  EventWriter events(&sink);
  ASSERT_EQ(Train(config, {(dir_ / "run").string()}, &events, &log).status, absl::OkStatus());
  SampleOptions options;
  options.run_dir = (dir_ / "run").string();
  options.prompt = "hello world";
  options.tokens = 10;
  std::string sampled;
  ASSERT_EQ(Sample(options, &sampled), absl::OkStatus());
  EXPECT_EQ(sampled.rfind("hello world", 0), 0u) << sampled;
  EXPECT_GT(sampled.size(), std::string("hello world").size());
}

// Issue 44, item 8: the export's tokenizer files (copies of the data set's and settings) were
// written through links planted at their names; now each is refused and its target untouched.
TEST_F(Gpt2BpeTest, HostileInputAnExportRefusesLinksAtTheTokenizersNames) {
  fs::create_directories(dir_ / "text");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "hello world, hello there " + std::to_string(i) + "\n";
  std::ofstream(dir_ / "text" / "a.txt") << text;
  PrepareStats report;
  ASSERT_EQ(PrepareText({{(dir_ / "text").string()}, (dir_ / "data").string(), 0.1, dir_.string()},
                        &report),
            absl::OkStatus());
  TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
  config.max_iters = 1;
  config.eval_interval = 1;
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  std::ostringstream sink, log;
  EventWriter events(&sink);
  ASSERT_EQ(Train(config, {(dir_ / "run").string()}, &events, &log).status, absl::OkStatus());
  HfExportReport exported;
  ASSERT_EQ(ExportHfGpt2((dir_ / "run").string(), (dir_ / "clean").string(), &exported),
            absl::OkStatus());
  ASSERT_TRUE(exported.tokenizer) << exported.no_tokenizer;
  const fs::path target = dir_ / "precious";
  for (const char* planted : {"vocab.json.tmp", "merges.txt.tmp", "tokenizer_config.json.tmp",
                              "special_tokens_map.json.tmp", "merges.txt"}) {
    const fs::path out = dir_ / "hf";
    fs::remove_all(out);
    fs::create_directories(out);
    std::ofstream(target) << "precious";
    fs::create_symlink(target, out / planted);
    const absl::Status status = ExportHfGpt2((dir_ / "run").string(), out.string(), &exported);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << planted << ": " << status;
    EXPECT_NE(status.message().find((out / planted).string() + ": it is a symbolic link"),
              std::string::npos)
        << status;
    std::ifstream in(target);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious") << planted;
    EXPECT_TRUE(fs::is_symlink(out / planted)) << planted;
  }
}

}  // namespace
}  // namespace spheret::train
