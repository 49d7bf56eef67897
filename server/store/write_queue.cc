#include "server/store/write_queue.h"

#include <algorithm>
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
  return Enqueue(std::move(command), Kind::kPlain);
}

std::future<absl::Status> WriteQueue::SubmitChained(Command command) {
  return Enqueue(std::move(command), Kind::kChained);
}

std::future<absl::Status> WriteQueue::ResetChain() { return Enqueue({}, Kind::kResetChain); }

std::future<absl::Status> WriteQueue::Enqueue(Command command, Kind kind) {
  Item item{std::move(command), {}, kind};
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
      if (queue_.front().kind == Kind::kResetChain) {  // its turn: everything before it is done
        chain_broken_ = false;
        queue_.front().done.set_value(absl::OkStatus());
        queue_.pop_front();
        continue;
      }
      while (!queue_.empty() && static_cast<int>(batch.size()) < max_batch_ &&
             queue_.front().kind != Kind::kResetChain) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    RunBatch(batch);
  }
}

void WriteQueue::RunBatch(std::deque<Item>& batch) {
  const auto start = std::chrono::steady_clock::now();
  const bool chained = std::any_of(batch.begin(), batch.end(),
                                   [](const Item& item) { return item.kind == Kind::kChained; });
  absl::Status begin = db_->Exec("BEGIN IMMEDIATE");
  if (!begin.ok()) {
    chain_broken_ = chain_broken_ || chained;
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
    if (item.kind == Kind::kChained && chain_broken_) {
      results.push_back(absl::UnavailableError("an earlier decision did not commit"));
      continue;
    }
    absl::Status status = db_->Exec("SAVEPOINT command");
    if (status.ok()) status = item.command(*db_);
    if (!status.ok() && item.kind == Kind::kChained) chain_broken_ = true;
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
  if (!commit.ok()) chain_broken_ = chain_broken_ || chained;
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
