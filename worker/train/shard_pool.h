// Concurrent shards of one batch on CPU threads. A batch of B rows trained on S threads as S
// shards, each with its own single-threaded (or T/S-threaded) ops, keeps every core busy in large
// kernels instead of forking and joining all of them around each small op: on 2 cores at preset
// xs, two shards of 6 rows train faster than one batch of 12 on 2 intra-op threads
// (bench/trainer_speed.sh prints both).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace spheret::train {

// Rows [begin, begin + count) of shard `index` when `rows` are cut into `shards` near-equal parts
// (the first rows % shards parts have one row more).
std::pair<int64_t, int64_t> ShardRows(int64_t rows, int64_t shards, int64_t index);

class ShardPool {
 public:
  // `shards` >= 1: the calling thread runs shard 0 and shards - 1 helper threads the others;
  // every thread runs its ops on `threads_per_shard` intra-op threads.
  ShardPool(int shards, int threads_per_shard);
  ~ShardPool();
  ShardPool(const ShardPool&) = delete;
  ShardPool& operator=(const ShardPool&) = delete;

  int size() const { return shards_; }

  // Calls fn(0), ..., fn(size() - 1) concurrently, each thread with the caller's thread-local
  // ATen state (grad mode, ...), and returns when all have returned. If shards threw, rethrows
  // the exception of the lowest such index.
  void Run(const std::function<void(int)>& fn);

 private:
  void HelperLoop(int index);

  const int shards_, threads_per_shard_;
  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  const std::function<void(int)>* job_ = nullptr;
  const void* job_state_ = nullptr;  // the caller's at::ThreadLocalState during Run
  uint64_t generation_ = 0;          // counts Run calls; a helper runs each generation once
  int pending_ = 0;                  // helpers still running the current generation
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace spheret::train
