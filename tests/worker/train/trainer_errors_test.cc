// The training loop under errors it cannot avoid (issue 28, item 3): an exception in the loop
// (LibTorch's, or a data set truncated under the run) ends Train with an error status, and the
// caller's EventWriter no longer records into the run's history afterwards. A resume on a data
// set rebuilt since is refused (issue 44, item 9).
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/worker/train/tiny_config.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

::testing::AssertionResult Has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

class TrainerErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spheret_trainer_errors_" + std::to_string(::getpid()));
    ASSERT_EQ(testing::PrepareTinyData(dir_), absl::OkStatus());
    config_ = testing::TinyTrainConfig((dir_ / "data").string());
    config_.max_iters = 20;
    config_.eval_interval = 5;
    config_.checkpoint_interval = 5;
    ASSERT_EQ(FinalizeConfig(&config_), absl::OkStatus());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Trains with `after_checkpoint`; the events it wrote into *events_text.
  TrainResult TrainWith(std::function<void(int64_t)> after_checkpoint, EventWriter* events,
                        bool resume = false, std::string* log_text = nullptr) {
    TrainOptions options;
    options.out_dir = (dir_ / "run").string();
    options.resume = resume;
    options.after_checkpoint = std::move(after_checkpoint);
    std::ostringstream log;
    TrainResult result = Train(config_, options, events, &log);
    if (log_text != nullptr) *log_text = log.str();
    return result;
  }

  // meta.json's dataset_id of the data set.
  std::string DatasetId() const {
    std::ifstream in(dir_ / "data" / "meta.json");
    return nlohmann::json::parse(in).value("dataset_id", "");
  }

  std::string History() const {
    std::ifstream in(dir_ / "run" / "events.jsonl");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  fs::path dir_;
  TrainConfig config_;
};

// Before: the exception left Train with the run's history still registered in `events`; the
// caller's error event then wrote through a dangling pointer (SIGSEGV/SIGABRT in spheret-lm).
TEST_F(TrainerErrorsTest, ALibTorchErrorInTheLoopIsTheRunsErrorAndTheWriterOutlivesIt) {
  std::ostringstream text;
  EventWriter events(&text);
  TrainResult result;
  EXPECT_NO_THROW(
      result = TrainWith([](int64_t step) { TORCH_CHECK(step != 5, "index 300 is out of range"); },
                         &events));
  EXPECT_EQ(result.outcome, TrainOutcome::kError);
  EXPECT_TRUE(Has(std::string(result.status.message()), "index 300 is out of range"));
  EXPECT_EQ(std::string(result.status.message()).find("frame #"), std::string::npos)
      << "a LibTorch backtrace in the message: " << result.status;
  const std::string before = History();
  events.Error("after the run");  // recorded nowhere but the stream
  EXPECT_EQ(History(), before);
  EXPECT_TRUE(Has(text.str(), R"({"message":"after the run","type":"error"})"));
}

// Before: train.bin was mapped, and the first batch after the truncation died of SIGBUS.
TEST_F(TrainerErrorsTest, ADataSetTruncatedInPlaceDuringTheRunEndsItWithAClearError) {
  std::ostringstream text;
  EventWriter events(&text);
  const fs::path train = dir_ / "data" / "train.bin";
  const TrainResult result = TrainWith([&](int64_t) { fs::resize_file(train, 0); }, &events);
  EXPECT_EQ(result.outcome, TrainOutcome::kError);
  EXPECT_TRUE(Has(std::string(result.status.message()), train.string() + " has 0 bytes but had"));
}

TEST_F(TrainerErrorsTest, IdsAboveTheVocabularyAreRefusedWhenTheDataSetIsOpened) {
  {
    std::fstream file(dir_ / "data" / "train.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(2 * 100);
    const uint16_t bad = 300;
    file.write(reinterpret_cast<const char*>(&bad), 2);
  }
  std::ostringstream text;
  EventWriter events(&text);
  const TrainResult result = TrainWith(nullptr, &events);
  EXPECT_EQ(result.outcome, TrainOutcome::kError);
  EXPECT_TRUE(Has(std::string(result.status.message()),
                  (dir_ / "data" / "train.bin").string() +
                      ": token id 300 at token 100 is not below vocab_size 256"));
  EXPECT_TRUE(Has(std::string(result.status.message()), "spheret-lm check-data --data"));
}

// Before: only meta.json's counts were checked, so a data set rebuilt from other text of the same
// length resumed, and the rest of the run trained on other tokens.
TEST_F(TrainerErrorsTest, AResumeOnADataSetRebuiltSinceIsRefusedNamingBothDataSets) {
  std::ostringstream text;
  EventWriter events(&text);
  config_.max_iters = 10;
  ASSERT_EQ(TrainWith(nullptr, &events).outcome, TrainOutcome::kDone);
  const std::string trained_on = DatasetId();
  ASSERT_EQ(testing::PrepareTinyData(dir_), absl::OkStatus());  // the same text again: resumes
  EXPECT_EQ(DatasetId(), trained_on);
  config_.max_iters = 15;
  std::string log;
  EXPECT_EQ(TrainWith(nullptr, &events, true, &log).outcome, TrainOutcome::kDone);
  EXPECT_TRUE(Has(log, "resumed from")) << log;
  {
    std::ofstream other(dir_ / "text" / "a.txt");
    for (int i = 0; i < 300; ++i) other << "LINE " << i << ": SPHERE RETRACTION NORMALIZATION\n";
  }
  const auto meta_before = nlohmann::json::parse(std::ifstream(dir_ / "data" / "meta.json"));
  ASSERT_EQ(testing::PrepareTinyData(dir_, /*keep_text=*/true), absl::OkStatus());
  const auto meta_after = nlohmann::json::parse(std::ifstream(dir_ / "data" / "meta.json"));
  EXPECT_EQ(meta_after["train_tokens"], meta_before["train_tokens"]);  // what was checked before
  EXPECT_EQ(meta_after["val_tokens"], meta_before["val_tokens"]);
  const std::string rebuilt = DatasetId();
  EXPECT_NE(rebuilt, trained_on);
  config_.max_iters = 20;
  const TrainResult result = TrainWith(nullptr, &events, true);
  EXPECT_EQ(result.outcome, TrainOutcome::kError);
  const std::string data = (dir_ / "data").string();
  EXPECT_TRUE(Has(std::string(result.status.message()),
                  "cannot resume from " + (dir_ / "run").string() + "/"));
  EXPECT_TRUE(Has(std::string(result.status.message()),
                  "the run trained on data set " + trained_on + " (" + data + "), but " + data +
                      " is data set " + rebuilt + ": it was rebuilt or changed since"));
}

TEST(EventWriterTest, ErrorMessagesAreBoundedAndInvalidUtf8NeverThrows) {
  std::ostringstream text;
  EventWriter events(&text);
  EXPECT_NO_THROW(events.Error("bad byte \xff here"));
  EXPECT_TRUE(Has(text.str(), "bad byte \xef\xbf\xbd here"));  // U+FFFD
  text.str("");
  events.Error(std::string(1 << 20, 'e'));
  EXPECT_LT(text.str().size(), kMaxErrorMessageBytes + 100);
  EXPECT_TRUE(Has(text.str(), "... (1048576 bytes in all)"));
}

}  // namespace
}  // namespace spheret::train
