// ParallelFor (worker/nn/parallel.h): the project's kernels on LibTorch's intra-op threads. Its
// subject is threading, so it sets two threads and restores one (ctest's OMP_NUM_THREADS=1).
#include "worker/nn/parallel.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace spheret::nn {
namespace {

class ParallelForTest : public ::testing::Test {
 protected:
  void TearDown() override { at::set_num_threads(1); }
};

struct Chunks {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::set<std::thread::id> threads;

  void Add(int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    ranges.emplace_back(begin, end);
    threads.insert(std::this_thread::get_id());
  }
  // Whether the chunks cover [begin, end) exactly once.
  bool Cover(int64_t begin, int64_t end) {
    std::vector<int> hits(static_cast<size_t>(end - begin), 0);
    for (const auto& [first, last] : ranges) {
      for (int64_t i = first; i < last; ++i) ++hits.at(static_cast<size_t>(i - begin));
    }
    for (int hit : hits) {
      if (hit != 1) return false;
    }
    return true;
  }
};

// The check that at::parallel_for called from a file built without OpenMP fails: there, it ran
// every range as one chunk on the calling thread at any thread count.
TEST_F(ParallelForTest, SplitsTheRangeOverLibTorchsThreads) {
  at::set_num_threads(2);
  Chunks chunks;
  ParallelFor(3, 67, 1, [&](int64_t begin, int64_t end) { chunks.Add(begin, end); });
  EXPECT_EQ(chunks.ranges.size(), 2u);
  EXPECT_EQ(chunks.threads.size(), 2u);
  EXPECT_TRUE(chunks.Cover(3, 67));
}

TEST_F(ParallelForTest, RunsOnTheCallingThreadAtOneThreadOrWithinTheGrain) {
  for (const auto& [threads, grain] : {std::pair<int, int64_t>{1, 1}, {2, 64}}) {
    at::set_num_threads(threads);
    Chunks chunks;
    ParallelFor(0, 64, grain, [&](int64_t begin, int64_t end) { chunks.Add(begin, end); });
    ASSERT_EQ(chunks.ranges.size(), 1u) << threads << " thread(s), grain " << grain;
    EXPECT_EQ(chunks.ranges[0], std::make_pair(int64_t{0}, int64_t{64}));
    EXPECT_EQ(*chunks.threads.begin(), std::this_thread::get_id());
  }
}

TEST_F(ParallelForTest, NestedCallsRunInTheirChunksThread) {
  at::set_num_threads(2);
  Chunks inner;
  ParallelFor(0, 2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ParallelFor(i * 10, i * 10 + 10, 1, [&](int64_t b, int64_t e) { inner.Add(b, e); });
    }
  });
  EXPECT_EQ(inner.ranges.size(), 2u);  // one chunk each: no team inside a team
  EXPECT_TRUE(inner.Cover(0, 20));
}

TEST_F(ParallelForTest, AnExceptionInAChunkReachesTheCaller) {
  at::set_num_threads(2);
  EXPECT_THROW(ParallelFor(0, 8, 1,
                           [](int64_t begin, int64_t) {
                             if (begin > 0) throw std::runtime_error("chunk failed");
                           }),
               std::runtime_error);
}

}  // namespace
}  // namespace spheret::nn
