#include "worker/train/shard_pool.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <algorithm>

namespace spheret::train {

std::pair<int64_t, int64_t> ShardRows(int64_t rows, int64_t shards, int64_t index) {
  const int64_t base = rows / shards, extra = rows % shards;
  const int64_t begin = index * base + std::min(index, extra);
  return {begin, base + (index < extra ? 1 : 0)};
}

ShardPool::ShardPool(int shards, int threads_per_shard)
    : shards_(std::max(shards, 1)), threads_per_shard_(std::max(threads_per_shard, 1)) {
  errors_.resize(shards_);
  at::set_num_threads(threads_per_shard_);
  for (int i = 1; i < shards_; ++i) helpers_.emplace_back([this, i] { HelperLoop(i); });
}

ShardPool::~ShardPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

void ShardPool::HelperLoop(int index) {
  at::set_num_threads(threads_per_shard_);  // this thread's OpenMP and MKL settings
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    const at::ThreadLocalState* state;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      state = static_cast<const at::ThreadLocalState*>(job_state_);
    }
    std::exception_ptr error;
    try {
      at::ThreadLocalStateGuard guard(*state);
      (*job)(index);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    errors_[index] = error;
    if (--pending_ == 0) work_done_.notify_one();
  }
}

void ShardPool::Run(const std::function<void(int)>& fn) {
  const at::ThreadLocalState state;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_state_ = &state;
    pending_ = shards_ - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  std::exception_ptr first;
  try {
    fn(0);
  } catch (...) {
    first = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return pending_ == 0; });
  for (int i = 1; i < shards_ && !first; ++i) first = errors_[i];
  if (first) std::rethrow_exception(first);
}

}  // namespace spheret::train
