// The worker's spool (worker/daemon/spool_file.h) and the spool's retry rule, on real files.
#include "worker/daemon/spool.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "worker/daemon/batches.h"
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

// Issue 28, item 2: damage in the middle of a spool (a bad sector, an old record over the length
// limit) skips to the next whole record, so the Finishes queued after it still reach the
// coordinator; before, "corrupt record at byte 0 ... the records after it are dropped".
TEST_F(SpoolFileTest, HostileInputDamageSkipsToTheNextWholeRecord) {
  const std::string first = SpoolRecord(Batch(1, 2));
  const std::string finish = SpoolRecord(Finish(1));
  for (const std::string& damage :
       {std::string("B\xff\xff\xff\x7f") + std::string(1000, 'x'),  // a length over the limit
        std::string("Z") + std::string(37, '\0'),                   // a bad kind
        std::string("F\x03\x00\x00\x00\xff\xff\xff")}) {            // does not parse
    std::string error;
    std::vector<SpoolItem> items = ParseSpool(
        damage + first + finish + SpoolRecord(Batch(2, 1)) + damage + SpoolRecord(Finish(2)),
        &error);
    ASSERT_EQ(items.size(), 4u) << error;
    EXPECT_EQ(items[0].batch.metrics_size(), 2);
    EXPECT_TRUE(items[1].is_finish);
    EXPECT_EQ(items[2].trial_id(), 2);
    EXPECT_TRUE(items[3].is_finish);
    EXPECT_EQ(items[3].trial_id(), 2);
    EXPECT_NE(error.find("at byte 0"), std::string::npos) << error;
    EXPECT_NE(error.find(absl::StrCat(damage.size(), " bytes up to the record at byte ",
                                      damage.size(), " are skipped")),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("2 damaged places"), std::string::npos) << error;
  }
  std::string error;  // a torn tail after damage is still only a torn tail
  EXPECT_EQ(ParseSpool(first + "Zjunk" + finish + "F\x40\x00", &error).size(), 2u);
  EXPECT_NE(error.find("at byte " + std::to_string(first.size())), std::string::npos) << error;
}

// A coordinator of the WorkerService calls a spool makes, with a receive limit.
class FakeCoordinator final : public v1::WorkerService::Service {
 public:
  grpc::Status IngestEvents(grpc::ServerContext*, grpc::ServerReader<v1::EventBatch>* reader,
                            v1::IngestEventsResponse*) override {
    v1::EventBatch batch;
    while (reader->Read(&batch)) {
      std::lock_guard<std::mutex> lock(mutex_);
      batches_.push_back(batch.trial_id());
      for (const v1::Event& event : batch.other()) seqs_.push_back(event.seq());
      if (batch.checkpoint_step() > 0) checkpoints_.push_back(batch.checkpoint_step());
    }
    return grpc::Status::OK;
  }
  grpc::Status Finish(grpc::ServerContext*, const v1::FinishRequest* request,
                      v1::FinishResponse*) override {
    std::lock_guard<std::mutex> lock(mutex_);
    finishes_.push_back(request->trial_id());
    return grpc::Status::OK;
  }
  std::vector<int64_t> batches() {
    std::lock_guard<std::mutex> lock(mutex_);
    return batches_;
  }
  std::vector<int64_t> finishes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finishes_;
  }
  std::vector<int64_t> seqs() {  // of the stored events received, in order
    std::lock_guard<std::mutex> lock(mutex_);
    return seqs_;
  }
  std::vector<int64_t> checkpoints() {
    std::lock_guard<std::mutex> lock(mutex_);
    return checkpoints_;
  }

 private:
  std::mutex mutex_;
  std::vector<int64_t> batches_, finishes_, seqs_, checkpoints_;
};

SpoolItem HugeBatch(int64_t trial, size_t bytes) {
  SpoolItem item = Batch(trial, 1);
  item.batch.add_other()->set_json(std::string(bytes, 'x'));
  return item;
}

// Issue 28, item 2: an item larger than the coordinator accepts is refused for good (RESOURCE_
// EXHAUSTED "larger than max"), logged through the rejected callback, and the items behind it,
// Finishes among them, are delivered. Before, it was retried forever and wedged the spool.
TEST_F(SpoolFileTest, HostileInputAnItemOverTheMessageLimitIsDroppedAndTheRestDelivered) {
  FakeCoordinator fake;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(1 << 20);  // a smaller limit than the spool's own
  builder.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  SpoolOptions options;
  options.spool_path = path_;
  options.max_backoff_ms = 200;
  std::mutex mutex;
  std::vector<std::string> rejected;
  Spool spool(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()),
      options, [&](const SpoolItem& item, const grpc::Status& status) {
        std::lock_guard<std::mutex> lock(mutex);
        rejected.push_back(
            absl::StrCat(item.trial_id(), " ", status.error_code(), " ", status.error_message()));
      });
  ASSERT_TRUE(spool.Start().ok());
  spool.Push(HugeBatch(1, 2 << 20));  // over the server's limit
  spool.Push(Finish(1));
  spool.Push(HugeBatch(2, 5 << 20));  // over any coordinator's: never sent
  spool.Push(Batch(2, 3));
  spool.Push(Finish(2));
  ASSERT_TRUE(spool.Flush(20'000)) << spool.depth() << " item(s) still queued";
  EXPECT_EQ(fake.finishes(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(fake.batches(), (std::vector<int64_t>{2}));
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_NE(rejected[0].find("1 8 "), std::string::npos) << rejected[0];  // RESOURCE_EXHAUSTED
  EXPECT_NE(rejected[0].find("larger than max"), std::string::npos) << rejected[0];
  EXPECT_NE(rejected[1].find("2 8 the event batch is 5242"), std::string::npos) << rejected[1];
  EXPECT_TRUE(FinalRejection(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                          "Received message larger than max (5 vs. 4)")));
}

// Issue 44, item 13: the coordinator now refuses an event batch above 1 MiB, and a worker's batch
// may pass it (it is sent once it reaches 1 MiB, by its last event; or it waited in a spool
// written before). The spool sends such a batch in parts under the limit on one stream: every
// row arrives, in order, and the checkpoint with the last part. Before, the 2.4 MB batch went as
// one message and was refused ("larger than max") and dropped.
TEST_F(SpoolFileTest, ABatchOverOneMibIsSentInPartsAndEveryRowArrives) {
  FakeCoordinator fake;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxBatchBytes));  // the coordinator's limit
  builder.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  SpoolOptions options;
  options.spool_path = path_;
  options.max_backoff_ms = 200;
  std::mutex mutex;
  std::vector<std::string> rejected;
  Spool spool(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()),
      options, [&](const SpoolItem&, const grpc::Status& status) {
        std::lock_guard<std::mutex> lock(mutex);
        rejected.push_back(status.error_message());
      });
  ASSERT_TRUE(spool.Start().ok());
  SpoolItem item;
  item.batch.set_trial_id(1);
  item.batch.set_attempt(1);
  for (int seq = 0; seq < 40; ++seq) {
    v1::Event* event = item.batch.add_other();
    event->set_seq(seq);
    event->set_json(std::string(60'000, 'e'));
  }
  item.batch.set_checkpoint_step(40);
  item.batch.set_checkpoint_path("ckpt.pt");
  ASSERT_GT(item.batch.ByteSizeLong(), 2'400'000u);
  spool.Push(item);
  spool.Push(Finish(1));
  ASSERT_TRUE(spool.Flush(20'000)) << spool.depth() << " item(s) still queued";
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_TRUE(rejected.empty()) << rejected.front();
  }
  std::vector<int64_t> expected(40);
  for (int seq = 0; seq < 40; ++seq) expected[seq] = seq;
  EXPECT_EQ(fake.seqs(), expected);
  EXPECT_EQ(fake.batches(), std::vector<int64_t>(3, 1)) << "three parts of trial 1";
  EXPECT_EQ(fake.checkpoints(), std::vector<int64_t>{40});
  EXPECT_EQ(fake.finishes(), std::vector<int64_t>{1});
}

}  // namespace
}  // namespace spheret::worker
