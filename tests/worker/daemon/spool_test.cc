// The worker's spool (worker/daemon/spool_file.h) and the spool's retry rule, on real files.
#include "worker/daemon/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "worker/daemon/spool_file.h"

namespace spheret::worker {
namespace {

namespace fs = std::filesystem;

SpoolItem Batch(int64_t trial, int steps) {
  SpoolItem item;
  item.batch.set_trial_id(trial);
  item.batch.set_attempt(1);
  for (int step = 0; step < steps; ++step) {
    v1::MetricRow* row = item.batch.add_metrics();
    row->set_name("train/loss");
    row->set_step(step);
    row->set_value(1.0);
  }
  return item;
}

SpoolItem Finish(int64_t trial) {
  SpoolItem item;
  item.is_finish = true;
  item.finish.set_trial_id(trial);
  item.finish.set_attempt(1);
  item.finish.set_outcome(v1::TRIAL_STATE_SUCCEEDED);
  return item;
}

class SpoolFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("spheret_spool_test_" + std::to_string(getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "spool.bin").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Content() {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }

  fs::path dir_;
  std::string path_;
};

// Issue 11, item 10: what is appended is on disk when Append returns (written and fsynced; a
// fresh reader, as after a crash, finds every item), and a torn last record is dropped.
TEST_F(SpoolFileTest, SpoolDurabilityAppendedItemsAreReadBackAfterARestart) {
  {
    SpoolFile spool(path_);
    std::vector<SpoolItem> items;
    std::string error;
    ASSERT_TRUE(spool.Open(&items, &error).ok());
    ASSERT_TRUE(items.empty());
    ASSERT_TRUE(spool.Append(Batch(1, 3)).ok());
    ASSERT_TRUE(spool.Append(Finish(1)).ok());
    EXPECT_EQ(spool.bytes(), static_cast<int64_t>(Content().size()));
  }
  std::ofstream(path_, std::ios::binary | std::ios::app) << "B\x40";  // a torn third record
  SpoolFile restarted(path_);
  std::vector<SpoolItem> items;
  std::string error;
  ASSERT_TRUE(restarted.Open(&items, &error).ok());
  EXPECT_EQ(error, "") << "a torn tail is what a crash mid-append leaves: not an error";
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].batch.metrics_size(), 3);
  EXPECT_TRUE(items[1].is_finish);
  EXPECT_EQ(Content(), SpoolRecord(items[0]) + SpoolRecord(items[1])) << "the tail was cut off";
}

// Issue 11, item 10: a rewrite that cannot be written whole leaves the old spool as it was
// (before, a failed rewrite could replace a good spool by a truncated one).
TEST_F(SpoolFileTest, SpoolDurabilityAFailedRewriteKeepsTheOldSpool) {
  SpoolFile spool(path_);
  std::vector<SpoolItem> items;
  std::string error;
  ASSERT_TRUE(spool.Open(&items, &error).ok());
  ASSERT_TRUE(spool.Append(Batch(1, 2)).ok());
  ASSERT_TRUE(spool.Append(Batch(2, 2)).ok());
  const std::string before = Content();
  fs::create_directory(path_ + ".tmp");  // the temporary file cannot be created
  EXPECT_FALSE(spool.Rewrite({}).ok());
  EXPECT_EQ(Content(), before);
  fs::remove(path_ + ".tmp");
  EXPECT_TRUE(spool.Rewrite({}).ok());
  EXPECT_EQ(Content(), "");
}

// Issue 11, item 9: a corrupt length field ends the read with an error naming the offset, keeps
// the records before it, and allocates nothing for it (it asked for 4 GiB before).
TEST_F(SpoolFileTest, ResourceBoundsACorruptLengthIsRefusedNotAllocated) {
  const std::string good = SpoolRecord(Batch(1, 2));
  std::string error;
  std::vector<SpoolItem> items = ParseSpool(good + "B\xff\xff\xff\xff" + "rest", &error);
  EXPECT_EQ(items.size(), 1u);
  EXPECT_NE(error.find("corrupt record at byte " + std::to_string(good.size())), std::string::npos)
      << error;
  error.clear();
  items = ParseSpool(good + std::string("X\x01\x00\x00\x00z", 6), &error);
  EXPECT_EQ(items.size(), 1u);
  EXPECT_NE(error.find("kind 88"), std::string::npos) << error;
}

// Issue 11, item 10: only answers that no retry can change drop an item. A refused token (a
// rotation: the worker restarts with the new one) or an unreachable coordinator keeps it; before,
// UNAUTHENTICATED or PERMISSION_DENIED dropped a Finish for good.
TEST(SpoolTest, SpoolDurabilityTokenRotationAndOutagesKeepItems) {
  for (grpc::StatusCode kept :
       {grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::DEADLINE_EXCEEDED,
        grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::INTERNAL, grpc::StatusCode::UNKNOWN,
        grpc::StatusCode::ABORTED}) {
    EXPECT_FALSE(FinalRejection(grpc::Status(kept, ""))) << kept;
  }
  for (grpc::StatusCode dropped :
       {grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::INVALID_ARGUMENT,
        grpc::StatusCode::NOT_FOUND}) {
    EXPECT_TRUE(FinalRejection(grpc::Status(dropped, ""))) << dropped;
  }
}

}  // namespace
}  // namespace spheret::worker
