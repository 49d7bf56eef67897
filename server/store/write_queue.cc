#include "server/store/write_queue.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace spheret::store {

WriteQueue::WriteQueue(std::unique_ptr<Database> db, int max_batch)
    : db_(std::move(db)), max_batch_(max_batch), thread_([this] { Loop(); }) {}

WriteQueue::~WriteQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

std::future<absl::Status> WriteQueue::Submit(Command command) {
  Item item{std::move(command), {}};
  std::future<absl::Status> done = item.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      item.done.set_value(absl::UnavailableError("the store is closing"));
      return done;
    }
    queue_.push_back(std::move(item));
  }
  ready_.notify_one();
  return done;
}

void WriteQueue::OnCommit(std::function<void(double)> callback) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_commit_ = std::move(callback);
}

int64_t WriteQueue::commits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return commits_;
}

void WriteQueue::Loop() {
  for (;;) {
    std::deque<Item> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      while (!queue_.empty() && static_cast<int>(batch.size()) < max_batch_) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    RunBatch(batch);
  }
}

void WriteQueue::RunBatch(std::deque<Item>& batch) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status begin = db_->Exec("BEGIN IMMEDIATE");
  if (!begin.ok()) {
    for (Item& item : batch) item.done.set_value(begin);
    return;
  }
  std::vector<absl::Status> results;
  results.reserve(batch.size());
  absl::Status lost;  // set when SQLite rolled the whole transaction back by itself
  for (Item& item : batch) {
    if (!lost.ok()) {
      results.push_back(lost);  // not run: it would run outside any transaction
      continue;
    }
    absl::Status status = db_->Exec("SAVEPOINT command");
    if (status.ok()) status = item.command(*db_);
    if (!db_->InTransaction()) {
      lost = absl::UnavailableError(absl::StrCat("the transaction was rolled back: ",
                                                 status.ok() ? "unknown cause" : status.message()));
    } else {
      if (!status.ok()) db_->Exec("ROLLBACK TO command").IgnoreError();
      db_->Exec("RELEASE command").IgnoreError();
    }
    results.push_back(status);
  }
  absl::Status commit = lost.ok() ? db_->Exec("COMMIT") : lost;
  if (!commit.ok() && db_->InTransaction()) db_->Exec("ROLLBACK").IgnoreError();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::function<void(double)> on_commit;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++commits_;
    on_commit = on_commit_;
  }
  if (on_commit) on_commit(seconds);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].done.set_value(commit.ok() ? results[i] : commit);
  }
}

}  // namespace spheret::store
