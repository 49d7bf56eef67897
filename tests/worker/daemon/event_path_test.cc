// The worker's event path from a trainer's stdout to a batch (worker/daemon/trainer_process.h,
// worker/daemon/batches.h) under hostile trainer output, and the reports of its RPC errors
// (worker/daemon/rpc_error_log.h).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "protocol/trainer_events.h"
#include "worker/daemon/batches.h"
#include "worker/daemon/rpc_error_log.h"
#include "worker/daemon/trainer_process.h"

namespace spheret::worker {
namespace {

// Issue 28, item 2: a 5 MiB stdout line reaches the worker as its first kMaxStdoutLineBytes bytes
// and its length (the rest is read and dropped, not held), and the lines after it flow whole.
TEST(EventPathTest, HostileInputAFiveMiBLineIsReadCutAndTheNextLinesWhole) {
  std::mutex mutex;
  std::vector<std::pair<std::string, size_t>> lines;
  absl::StatusOr<std::unique_ptr<TrainerProcess>> process = TrainerProcess::Start(
      {{"/bin/sh", "-c",
        "head -c 5242880 /dev/zero | tr '\\0' x; echo; echo '{\"type\":\"stopped\",\"step\":1}';"
        " printf tail"},
       {},
       "",
       ""},
      [&](const std::string& line, size_t line_bytes) {
        std::lock_guard<std::mutex> lock(mutex);
        lines.emplace_back(line, line_bytes);
      });
  ASSERT_TRUE(process.ok()) << process.status();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!(*process)->Exited() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE((*process)->Exited());
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].first, std::string(kMaxStdoutLineBytes, 'x'));
  EXPECT_EQ(lines[0].second, size_t{5} << 20);
  EXPECT_EQ(lines[1].first, R"({"type":"stopped","step":1})");
  EXPECT_EQ(lines[1].second, lines[1].first.size());
  EXPECT_EQ(lines[2], std::make_pair(std::string("tail"), size_t{4}));
}

// Issue 28, item 2: an over-long line becomes a small stored error event that names its size and
// the limit and shows its start (invalid UTF-8 in it written as U+FFFD), and the parser refuses
// such a line unread.
TEST(EventPathTest, HostileInputAnOverlongLineBecomesABoundedErrorEvent) {
  const std::string prefix =
      "\xff\xfe{\"type\":\"error\",\"message\":\"" + std::string(kMaxStdoutLineBytes, 'm');
  v1::EventBatch batch;
  const size_t added = AddOverlongLine(prefix.substr(0, kMaxStdoutLineBytes), 6'000'000, 7, &batch);
  ASSERT_EQ(batch.other_size(), 1);
  EXPECT_EQ(batch.other(0).seq(), 7);
  EXPECT_LT(batch.ByteSizeLong(), 1'000u);
  EXPECT_GE(added, batch.ByteSizeLong());
  protocol::TrainerEvent event;
  ASSERT_TRUE(protocol::ParseTrainerEvent(batch.other(0).json(), &event).ok())
      << batch.other(0).json();
  const std::string message = std::get<protocol::ErrorEvent>(event).message;
  EXPECT_NE(message.find(
                "a stdout line of 6000000 bytes is over the limit of an event line (65536 bytes)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("\xef\xbf\xbd\xef\xbf\xbd{\"type\":\"error\""), std::string::npos)
      << message;
  const absl::Status refused = protocol::ParseTrainerEvent(
      R"({"type":"error","message":")" + std::string(70'000, 'm') + "\"}", &event);
  EXPECT_EQ(refused.message(),
            "a line of 70029 bytes is over the limit of an event line (65536 bytes)");
}

// Issue 28, item 10: an RPC error is logged with the RPC, the code and the message, cut; one that
// repeats at most once per interval, with how many were not logged.
TEST(EventPathTest, HostileInputRpcErrorsAreLoggedByNameCodeAndMessageRateLimited) {
  RpcErrorLog log(/*interval_ms=*/1'000);
  const grpc::Status big(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      "Received message larger than max (5000000 vs. 4194304)" + std::string(10'000, '!'));
  const std::string first = log.Log("Acquire", big, 0);
  EXPECT_EQ(first.substr(0, 94),
            "Acquire failed: RESOURCE_EXHAUSTED: Received message larger than max (5000000 vs. "
            "4194304)!!!!");
  EXPECT_LT(first.size(), 400u);
  EXPECT_EQ(log.Log("Acquire", big, 500), "");
  EXPECT_EQ(log.Log("Acquire", big, 900), "");
  EXPECT_NE(log.Log("Heartbeat", big, 900), "") << "another RPC is another kind";
  EXPECT_NE(log.Log("Acquire", grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"), 900), "");
  const std::string again = log.Log("Acquire", big, 1'000);
  EXPECT_NE(again.find("(2 more since the last report)"), std::string::npos) << again;
}

}  // namespace
}  // namespace spheret::worker
