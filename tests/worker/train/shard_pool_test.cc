// The shard pool: row ranges, concurrency, thread-local grad mode and errors.
#include "worker/train/shard_pool.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <stdexcept>
#include <thread>

namespace spheret::train {
namespace {

TEST(ShardRowsTest, CoversTheRowsInNearEqualParts) {
  EXPECT_EQ(ShardRows(12, 2, 0), (std::pair<int64_t, int64_t>{0, 6}));
  EXPECT_EQ(ShardRows(12, 2, 1), (std::pair<int64_t, int64_t>{6, 6}));
  EXPECT_EQ(ShardRows(4, 3, 0), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(ShardRows(4, 3, 1), (std::pair<int64_t, int64_t>{2, 1}));
  EXPECT_EQ(ShardRows(4, 3, 2), (std::pair<int64_t, int64_t>{3, 1}));
  for (int64_t rows : {1, 5, 12, 13}) {
    for (int64_t shards = 1; shards <= rows; ++shards) {
      int64_t next = 0;
      for (int64_t i = 0; i < shards; ++i) {
        const auto [begin, count] = ShardRows(rows, shards, i);
        EXPECT_EQ(begin, next);
        EXPECT_GE(count, rows / shards);
        EXPECT_LE(count, rows / shards + 1);
        next = begin + count;
      }
      EXPECT_EQ(next, rows);
    }
  }
}

TEST(ShardPoolTest, RunsEveryShardOnItsOwnThreadConcurrently) {
  ShardPool pool(3, 1);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> arrived{0};
    std::vector<std::thread::id> ids(3);
    pool.Run([&](int s) {
      ids[s] = std::this_thread::get_id();
      ++arrived;
      while (arrived.load() < 3) std::this_thread::yield();  // Returns only if all run at once.
    });
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    EXPECT_NE(ids[1], ids[0]);
    EXPECT_NE(ids[2], ids[1]);
  }
}

TEST(ShardPoolTest, HelpersSeeTheCallersGradMode) {
  ShardPool pool(2, 1);
  std::vector<int> enabled(2, -1);
  {
    torch::NoGradGuard no_grad;
    pool.Run([&](int s) { enabled[s] = torch::GradMode::is_enabled(); });
  }
  EXPECT_EQ(enabled, (std::vector<int>{0, 0}));
  pool.Run([&](int s) { enabled[s] = torch::GradMode::is_enabled(); });
  EXPECT_EQ(enabled, (std::vector<int>{1, 1}));
}

TEST(ShardPoolTest, RethrowsTheLowestFailingShardsErrorAndStaysUsable) {
  ShardPool pool(3, 1);
  try {
    pool.Run([](int s) {
      if (s >= 1) throw std::runtime_error("shard " + std::to_string(s));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "shard 1");
  }
  std::atomic<int> ran{0};
  pool.Run([&](int) { ++ran; });
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace
}  // namespace spheret::train
